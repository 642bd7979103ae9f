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
	"cmp"
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
	dir          string
	expandEnv    bool
	interval     time.Duration
	maxFileSize  int64
	maxTotalSize int64
	clock        clock.PassiveClock
	// pollHook, when set, is called after each poll; see SetPollHook.
	pollHook func(contents map[string][]byte)

	mu sync.Mutex
	// version counts changes; it is the resourceVersion of lists and objects.
	version uint64
	files   map[string]*fileState
	// declared is what files declare, by kind and name, and duplicates the resources they
	// declare twice; both are computed again only when a file's declarations change.
	declared   map[string]map[string]object
	duplicates []error
	kinds      map[string]*kindState
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

// Options configure a Source.
type Options struct {
	// ExpandEnv replaces $VAR and ${VAR} in the manifests with environment variables first.
	ExpandEnv bool
	// PollInterval is how often the directory is read; 0 means DefaultPollInterval.
	PollInterval time.Duration
	// MaxFileSize caps the bytes of one manifest file, MaxTotalSize those of all the files
	// applied at once; 0 means DefaultMaxFileSize, DefaultMaxTotalSize.
	MaxFileSize, MaxTotalSize int64
}

// NewSource reads the directory until every file's content has settled: read twice, one
// poll interval apart, the same. Any problem stops start-up: a file that does not decode or
// cannot be read (not a regular file, over a size cap), a resource declared twice, a
// directory that cannot be read, files that keep changing. At start-up nothing was declared
// before, so a file left out would delete what SPIRE holds for it.
func NewSource(ctx context.Context, dir string, opts Options) (*Source, error) {
	interval := cmp.Or(opts.PollInterval, DefaultPollInterval)
	s := &Source{
		dir: dir, expandEnv: opts.ExpandEnv, interval: interval, clock: clock.RealClock{},
		maxFileSize:  cmp.Or(opts.MaxFileSize, DefaultMaxFileSize),
		maxTotalSize: cmp.Or(opts.MaxTotalSize, DefaultMaxTotalSize),
		files:        map[string]*fileState{},
		problems:     map[string]bool{},
		kinds:        map[string]*kindState{},
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
		// A content refused for the total cap is a problem, not a change in progress.
		if state.pending && state.refused == nil {
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
	before := s.files
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
	// Comparing every resource served with its declaration is the costly part of a poll, and
	// needless when no file declares anything new.
	if !sameDeclarations(before, s.files) {
		for _, change := range s.apply(desired) {
			logger.Info("Static manifest changed", "kind", change.kind, "name", change.name, "change", change.event)
		}
	}
	if s.pollHook != nil {
		s.pollHook(contents)
	}
}

// read reads the directory's manifest files, decoding the content of those that settled, and
// returns the resources they declare by kind and name. Files are read in name order; a
// resource declared again by a later file is a problem and the first one wins. A file is read
// only when stat says it may have changed. A file that cannot be read, or whose content would
// take the manifests over the total cap, is a problem and keeps what it declared before. With
// a poll hook set, it also returns the content of each file read, by name.
func (s *Source) read(logger klog.Logger) (map[string]map[string]object, []error, map[string][]byte, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("reading staticManifestPath: %w", err)
	}
	var paths []string
	for _, entry := range entries {
		// Dot files include the ..data directory and symlinks of a mounted ConfigMap.
		if name := entry.Name(); !strings.HasPrefix(name, ".") && isManifest(name) {
			paths = append(paths, filepath.Join(s.dir, name))
		}
	}
	// held is the bytes of the contents applied, of the files still there.
	var held int64
	for _, path := range paths {
		if state := s.files[path]; state != nil {
			held += state.size
		}
	}
	var problems []error
	files := map[string]*fileState{}
	var contents map[string][]byte
	if s.pollHook != nil {
		contents = map[string][]byte{}
	}
	for _, path := range paths {
		prev := s.files[path]
		got, err := s.readIfChanged(path, prev)
		if got.dir {
			continue
		}
		state := prev
		switch {
		case errors.Is(err, errChangedWhileRead):
			state = prev.changing(s.clock.Now())
		case err != nil:
			// An unreadable file keeps its state.
			problems = append(problems, err)
		case !got.unchanged:
			room := s.maxTotalSize - held + prev.heldSize()
			state = s.observe(logger, path, prev, got.data, room)
			state.id, state.idTrusted = got.id, got.trusted
			held += state.size - prev.heldSize()
			if contents != nil {
				contents[filepath.Base(path)] = got.data
			}
		}
		if state != nil {
			files[path] = state
			problems = append(problems, state.problems()...)
		}
	}
	before := s.files
	s.files = files
	if s.declared == nil || !sameDeclarations(before, files) {
		s.declared, s.duplicates = declarations(files)
	}
	return s.declared, append(problems, s.duplicates...), contents, nil
}

// declarations returns the resources files declare, by kind and name, and a problem for each
// resource declared again by a later file (by name), which is ignored.
func declarations(files map[string]*fileState) (map[string]map[string]object, []error) {
	desired := map[string]map[string]object{kindStaticEntry: {}, kindTrustDomain: {}}
	declaredIn := map[string]string{}
	var problems []error
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
	return desired, problems
}

// sameDeclarations says whether the files of after declare what those of before did: the
// same files, each with the very objects it had.
func sameDeclarations(before, after map[string]*fileState) bool {
	if len(before) != len(after) {
		return false
	}
	for path, a := range after {
		b, ok := before[path]
		if !ok || len(a.objects) != len(b.objects) || len(a.objects) > 0 && &a.objects[0] != &b.objects[0] {
			return false
		}
	}
	return true
}

// readResult is what readIfChanged found.
type readResult struct {
	// dir says the path is a directory, which is skipped; unchanged, that stat says the file
	// holds the content last read, which is not read again.
	dir, unchanged bool
	// data is the content read, id what stat said of it, and trusted whether the same id
	// later means the same content (see fileID).
	data    []byte
	id      fileID
	trusted bool
}

// readIfChanged reads the file at path, symlinks followed, unless it is a directory or stat
// says it holds the content last read. It reads only a regular file within the size cap.
func (s *Source) readIfChanged(path string, prev *fileState) (readResult, error) {
	info, err := statManifest(path)
	if err != nil {
		return readResult{}, err
	}
	if info.IsDir() {
		return readResult{dir: true}, nil
	}
	if err := checkRegular(path, info.Mode()); err != nil {
		return readResult{}, err
	}
	if err := checkSize(path, info.Size(), s.maxFileSize); err != nil {
		return readResult{}, err
	}
	if prev.unchanged(identify(info)) {
		return readResult{unchanged: true}, nil
	}
	data, id, readStart, err := readManifest(path, s.maxFileSize)
	if err != nil {
		return readResult{}, err
	}
	return readResult{data: data, id: id, trusted: id.trustedAfterRead(readStart)}, nil
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
