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

package informercache

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// PodProjection caches pods as Pods, or as Projected pods where templates read more than a
// Pod keeps, holding only the fields the templates of the active ClusterSPIFFEIDs can read
// (render.Reach), and never lets a pod be rendered with fewer fields than a template reads:
//
//   - every cached pod carries its generation, the index of the reach it was projected with;
//   - before a pod is rendered, Check compares that reach with the ClusterSPIFFEIDs'. When it
//     falls short, the reach widens to a new generation, the pod informer is made to list
//     again (which projects every pod anew), and Check fails, so that the sync is retried
//     until the pod in the cache is a wider projection.
//
// Until Narrow is called it keeps all that templates can see but managedFields, which covers
// every template but one reading managedFields: that is what the cache keeps when the pod
// informer cannot be made to list again. The factory's pod lister cannot read the pods it
// caches: only controllers that read pods through ViewOf or a PodLister may share it.
type PodProjection struct {
	mu sync.Mutex
	// generations holds every reach projected with so far, by generation, and is replaced,
	// never changed: readers load it without the lock.
	generations atomic.Pointer[[]generation]
	// relist makes the pod informer list again; nil until the informer is registered here.
	relist func()
}

type generation struct {
	reach render.Reach
	// compact is set when a Pod keeps all of reach.
	compact bool
}

// NewPodProjection returns a projection that keeps all templates can see until narrowed.
func NewPodProjection() *PodProjection {
	p := &PodProjection{}
	p.generations.Store(&[]generation{{reach: fullReach}})
	return p
}

// Transform is the informer transform of the factory whose pods p projects: pods become Pods
// or Projected pods of the current generation; other objects are trimmed as Trim does.
func (p *PodProjection) Transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *Pod, *Projected:
		return o, nil // The transform must be idempotent.
	case *corev1.Pod:
		gens := *p.generations.Load()
		g := uint32(len(gens) - 1)
		if gens[g].compact {
			return Compact(o, g), nil
		}
		return &Projected{pod: render.ProjectPod(o, gens[g].reach), generation: g}, nil
	}
	return Trim(obj)
}

// RegisterInformer registers in factory the pod informer, watching namespace ("" for all)
// narrowed by tweak, with a watch the projection can end to list pods again. It must come
// before anything else asks the factory for the pod informer: when the factory holds one
// already, the projection cannot narrow, and pods stay whole but for managedFields.
func (p *PodProjection) RegisterInformer(factory informers.SharedInformerFactory, namespace string, tweak func(*metav1.ListOptions)) {
	var informer *RelistableInformer
	factory.InformerFor(&corev1.Pod{}, func(client clientset.Interface, resync time.Duration) cache.SharedIndexInformer {
		informer = NewRelistableInformer(cache.ToListerWatcherWithContext(cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				tweak(&o)
				return client.CoreV1().Pods(namespace).List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				tweak(&o)
				return client.CoreV1().Pods(namespace).Watch(ctx, o)
			},
		}, client)), &corev1.Pod{}, resync, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		return informer
	})
	if informer != nil {
		p.mu.Lock()
		p.relist = informer.Relist
		p.mu.Unlock()
	}
}

// Narrow makes the projection keep only what reach returns from now on, once: what the
// parent ID template and the ClusterSPIFFEIDs of the controller's class read at start. It
// does nothing, and does not call reach, when the pod informer cannot list again (see
// RegisterInformer) or after the first call, so that every controller sharing the cache may
// call it. Pods cached before keep their wider projection until they change.
func (p *PodProjection) Narrow(reach func() render.Reach) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.relist != nil && len(*p.generations.Load()) == 1 {
		p.appendGeneration(reach())
	}
}

// appendGeneration makes reach the current generation; p.mu must be held.
func (p *PodProjection) appendGeneration(reach render.Reach) {
	gens := *p.generations.Load()
	if len(gens) == math.MaxUint32 {
		return // Never in practice: each generation takes a ClusterSPIFFEID reading a new field.
	}
	next := append(slices.Clip(gens), generation{reach: reach, compact: Covers(reach)})
	p.generations.Store(&next)
}

// NotProjectedError is why a cached pod cannot be rendered yet.
type NotProjectedError struct {
	Pod, ClusterSPIFFEID string
}

func (e NotProjectedError) Error() string {
	return fmt.Sprintf("the cached pod %s lacks fields ClusterSPIFFEID %s can read: waiting for the pod informer to list pods with them",
		e.Pod, e.ClusterSPIFFEID)
}

// Check returns a NotProjectedError when the cached pod lacks fields that one of the
// ClusterSPIFFEIDs can read, after widening the reach and asking for a new list. A pod that
// was not projected is whole, and so is every pod of a nil PodProjection or of one that
// cannot list again.
func (p *PodProjection) Check(pod View, clusterSPIFFEIDs []*render.ClusterSPIFFEID) error {
	if p == nil || !pod.projected {
		return nil
	}
	gens := *p.generations.Load()
	if int(pod.generation) >= len(gens) {
		return fmt.Errorf("pod %s/%s: projection generation %d is not one of this cache's", pod.Namespace, pod.Name, pod.generation)
	}
	reach := gens[pod.generation].reach
	var missing *render.ClusterSPIFFEID
	for _, c := range clusterSPIFFEIDs {
		if !reach.Covers(c.Reach()) {
			missing = c
			break
		}
	}
	if missing == nil || !p.widen(clusterSPIFFEIDs) {
		return nil
	}
	return NotProjectedError{Pod: pod.Namespace + "/" + pod.Name, ClusterSPIFFEID: missing.Name}
}

// widen makes the current reach cover every ClusterSPIFFEID, and lists pods again if that
// took a new generation. It reports false when the pod informer cannot list again: its pods
// keep all templates can see.
func (p *PodProjection) widen(clusterSPIFFEIDs []*render.ClusterSPIFFEID) bool {
	p.mu.Lock()
	relist := p.relist
	if relist == nil {
		p.mu.Unlock()
		return false
	}
	gens := *p.generations.Load()
	reach := gens[len(gens)-1].reach
	grew := false
	for _, c := range clusterSPIFFEIDs {
		if !reach.Covers(c.Reach()) {
			reach.Union(c.Reach())
			grew = true
		}
	}
	if grew {
		p.appendGeneration(reach)
	}
	p.mu.Unlock()
	if grew {
		relist()
	}
	return true
}
