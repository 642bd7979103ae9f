/*
Copyright 2026 The spire-registrar Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package static

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/spire-registrar/spire-registrar/pkg/metrics"
)

// DefaultPollInterval is how often the directory is read for changes. Reading a few small
// files is cheap, and polling sees every way a file can change, including the symlink swap a
// mounted ConfigMap is updated with. It is also the time a file's content must stay unchanged
// before it is applied (see settle.go).
const DefaultPollInterval = time.Second

// maxStartReads bounds how many times NewSource reads the directory waiting for every file to
// settle before it gives up.
const maxStartReads = 30

// Source serves the resources of a manifest directory to informers and keeps them current
// with the files.
//
// A file's content is applied only once it has stayed unchanged for a poll interval, so that
// a file caught in the middle of a write is never applied (see settle.go). A file that stops
// decoding keeps what it declared before, and the problem is logged: a typo must not delete
// entries. A file that is removed, or whose settled content no longer declares a resource,
// deletes it.
type Source struct {
	dir       string
	expandEnv bool
	interval  time.Duration
	clock     clock.PassiveClock
	// pollHook, when set, is called after each poll; see SetPollHook.
	pollHook func(contents map[string][]byte)

	mu sync.Mutex
	// version counts changes; it is the resourceVersion of lists and objects.
	version uint64
	files   map[string]*fileState
	kinds   map[string]*kindState
	// problems are those of the last read, so each is logged once, when it appears.
	problems map[string]bool

	informers []cache.SharedIndexInformer
	wg        sync.WaitGroup
}

// kindState holds the resources of one kind as informers see them.
type kindState struct {
	objects     map[string]*served
	broadcaster *watch.Broadcaster
}

// served is a resource as the file declares it and as informers get it: with the metadata an
// API server would add.
type served struct {
	declared object
	obj      object
}

// NewSource reads the directory until every file's content has settled: read twice, one
// poll interval apart, the same. Any problem stops start-up: a file that does not decode, a
// resource declared twice, a directory that cannot be read, files that keep changing.
func NewSource(ctx context.Context, dir string, expandEnv bool, interval time.Duration) (*Source, error) {
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	s := &Source{
		dir: dir, expandEnv: expandEnv, interval: interval, clock: clock.RealClock{},
		files:    map[string]*fileState{},
		problems: map[string]bool{},
		kinds:    map[string]*kindState{},
	}
	for _, kind := range []string{kindStaticEntry, kindTrustDomain} {
		s.kinds[kind] = &kindState{objects: map[string]*served{}, broadcaster: watch.NewBroadcaster(100, watch.WaitIfChannelFull)}
	}
	logger := klog.FromContext(ctx)
	for reads := 1; ; reads++ {
		desired, problems, _, err := s.read(logger)
		if err != nil {
			return nil, err
		}
		unsettled := s.unsettled()
		if len(unsettled) == 0 {
			if len(problems) > 0 {
				return nil, fmt.Errorf("static manifests in %s: %w", dir, errors.Join(problems...))
			}
			s.apply(desired)
			return s, nil
		}
		if reads == maxStartReads {
			return nil, fmt.Errorf("static manifests in %s: %s kept changing for %d reads %v apart",
				dir, strings.Join(unsettled, ", "), reads, interval)
		}
		timer := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, fmt.Errorf("static manifests in %s: %w", dir, ctx.Err())
		case <-timer.C:
		}
	}
}

// SetPollHook makes each poll call hook once it has applied what it read, with the content
// of each manifest file it read, by file name; the next poll waits for hook to return. It
// lets tests act between polls. Call it before Start.
func (s *Source) SetPollHook(hook func(contents map[string][]byte)) {
	s.pollHook = hook
}

// unsettled returns the files whose content has not settled.
func (s *Source) unsettled() []string {
	var paths []string
	for path, state := range s.files {
		if state.pending {
			paths = append(paths, path)
		}
	}
	slices.Sort(paths)
	return paths
}

// Start runs the informers created so far and the poller until ctx is done.
func (s *Source) Start(ctx context.Context) {
	for _, informer := range s.informers {
		s.wg.Go(func() { informer.RunWithContext(ctx) })
	}
	s.wg.Go(func() {
		wait.UntilWithContext(ctx, s.poll, s.interval)
		for _, k := range s.kinds {
			k.broadcaster.Shutdown()
		}
	})
}

// Shutdown waits for what Start started to end; call it after ctx is done.
func (s *Source) Shutdown() {
	s.wg.Wait()
}

// poll reads the directory and turns what changed into watch events. Problems are logged
// when they first appear, and keep the last good content of their file.
func (s *Source) poll(ctx context.Context) {
	logger := klog.FromContext(ctx)
	desired, problems, contents, err := s.read(logger)
	if err != nil {
		// An unreadable directory says nothing about what is declared: change nothing.
		logger.Error(err, "Reading static manifests; keeping what was read before")
		metrics.StaticManifestErrors.Set(1)
		return
	}
	metrics.StaticManifestErrors.Set(float64(len(problems)))
	current := map[string]bool{}
	for _, p := range problems {
		current[p.Error()] = true
		if !s.problems[p.Error()] {
			logger.Error(p, "Invalid static manifest; what it declared before is kept")
		}
	}
	s.problems = current
	for _, change := range s.apply(desired) {
		logger.Info("Static manifest changed", "kind", change.kind, "name", change.name, "change", change.event)
	}
	if s.pollHook != nil {
		s.pollHook(contents)
	}
}

// read reads the directory's manifest files, decoding the content of those that settled, and
// returns the resources they declare by kind and name. Files are read in name order; a
// resource declared again by a later file is a problem and the first one wins. With a poll
// hook set, it also returns each file's content by name.
func (s *Source) read(logger klog.Logger) (map[string]map[string]object, []error, map[string][]byte, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("reading staticManifestPath: %w", err)
	}
	var problems []error
	files := map[string]*fileState{}
	var contents map[string][]byte
	if s.pollHook != nil {
		contents = map[string][]byte{}
	}
	for _, entry := range entries {
		name := entry.Name()
		// Dot files include the ..data directory and symlinks of a mounted ConfigMap.
		if strings.HasPrefix(name, ".") || !isManifest(name) {
			continue
		}
		path := filepath.Join(s.dir, name)
		data, isDir, err := readFile(path)
		if isDir {
			continue
		}
		state := s.files[path]
		if err != nil {
			// An unreadable file keeps its state.
			problems = append(problems, err)
		} else {
			state = s.observe(logger, path, state, data)
			if contents != nil {
				contents[name] = data
			}
		}
		if state != nil {
			files[path] = state
			if state.err != nil {
				problems = append(problems, state.err)
			}
		}
	}
	s.files = files

	desired := map[string]map[string]object{kindStaticEntry: {}, kindTrustDomain: {}}
	declaredIn := map[string]string{}
	for _, path := range slices.Sorted(maps.Keys(files)) {
		for _, obj := range files[path].objects {
			kind := obj.GetObjectKind().GroupVersionKind().Kind
			key := kind + "/" + obj.GetName()
			if first, dup := declaredIn[key]; dup {
				problems = append(problems, fmt.Errorf("%s: %s %q is already declared in %s; this one is ignored", path, kind, obj.GetName(), first))
				continue
			}
			declaredIn[key] = path
			desired[kind][obj.GetName()] = obj
		}
	}
	return desired, problems, contents, nil
}

// readFile returns a file's content, or that it is a directory (which is skipped).
func readFile(path string) ([]byte, bool, error) {
	info, err := os.Stat(path)
	if err == nil && info.IsDir() {
		return nil, true, nil
	}
	var data []byte
	if err == nil {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", path, err)
	}
	return data, false, nil
}

func isManifest(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// change is one watch event sent to informers.
type change struct {
	kind, name string
	event      watch.EventType
}

// apply makes the served resources equal to the desired ones and sends a watch event for each
// difference. Each change gets its own resourceVersion.
func (s *Source) apply(desired map[string]map[string]object) []change {
	s.mu.Lock()
	defer s.mu.Unlock()
	var changes []change
	for _, kind := range slices.Sorted(maps.Keys(s.kinds)) {
		state := s.kinds[kind]
		for _, name := range slices.Sorted(maps.Keys(desired[kind])) {
			obj := desired[kind][name]
			old := state.objects[name]
			if old != nil && apiequality.Semantic.DeepEqual(old.declared, obj) {
				continue
			}
			s.version++
			served := &served{declared: obj, obj: obj.DeepCopyObject().(object)}
			served.obj.SetResourceVersion(strconv.FormatUint(s.version, 10))
			event := watch.Added
			if old == nil {
				served.obj.SetUID(uuid.NewUUID())
				served.obj.SetGeneration(1)
				// Resources read together are equally old; conflicts then go by name.
				served.obj.SetCreationTimestamp(metav1.NewTime(time.Now().Truncate(time.Second)))
			} else {
				event = watch.Modified
				served.obj.SetUID(old.obj.GetUID())
				served.obj.SetCreationTimestamp(old.obj.GetCreationTimestamp())
				generation := old.obj.GetGeneration()
				if !sameSpec(old.declared, obj) {
					generation++
				}
				served.obj.SetGeneration(generation)
			}
			state.objects[name] = served
			changes = append(changes, change{kind, name, event})
			_ = state.broadcaster.Action(event, served.obj.DeepCopyObject())
		}
		for _, name := range slices.Sorted(maps.Keys(state.objects)) {
			if _, ok := desired[kind][name]; ok {
				continue
			}
			s.version++
			gone := state.objects[name].obj.DeepCopyObject().(object)
			gone.SetResourceVersion(strconv.FormatUint(s.version, 10))
			delete(state.objects, name)
			changes = append(changes, change{kind, name, watch.Deleted})
			_ = state.broadcaster.Action(watch.Deleted, gone)
		}
	}
	return changes
}

// sameSpec reports whether two declarations differ only in metadata, which, as in the API
// server, does not bump the generation.
func sameSpec(a, b object) bool {
	a, b = a.DeepCopyObject().(object), b.DeepCopyObject().(object)
	a.SetLabels(nil)
	a.SetAnnotations(nil)
	b.SetLabels(nil)
	b.SetAnnotations(nil)
	return apiequality.Semantic.DeepEqual(a, b)
}
