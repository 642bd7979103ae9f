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

package app

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/spire-registrar/spire-registrar/pkg/controller/entry"
	"github.com/spire-registrar/spire-registrar/pkg/podcache"
	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// podProjection caches pods as projections that keep only the fields the templates of the
// active ClusterSPIFFEIDs can read (render.Reach), and never lets the controller render a
// pod with fewer fields than a template reads:
//
//   - every projection it makes is stamped with its generation, the index of the reach it
//     kept, in the pod's status message, which neither templates nor the controller read;
//   - before a pod is rendered, check compares that reach with the ClusterSPIFFEIDs'. When it
//     falls short, the reach widens to a new generation, the pod informer is made to list
//     again (which projects every pod anew), and check fails, so that the sync is retried
//     until the pod in the cache is a wider projection.
//
// Until narrow is called, it keeps all that templates can see but managedFields, which
// covers every template but one reading managedFields: that is what the cache keeps when the
// pod informer cannot be made to list again.
type podProjection struct {
	mu sync.Mutex
	// generations holds every reach projected with so far, by generation, and is replaced,
	// never changed: readers load it without the lock.
	generations atomic.Pointer[[]generation]
	// relist makes the pod informer list again; nil until the informer is ours.
	relist func()
	// compact makes the transform cache pods as podcache.Pods where the reach allows it:
	// only when nothing but the entry controller reads the factory's pods.
	compact bool
}

type generation struct {
	reach render.Reach
	stamp string
	// compact is set when a podcache.Pod keeps all of reach.
	compact bool
}

// stampPrefix starts the status message of a projected pod; the generation follows.
const stampPrefix = "spire-registrar projection "

func newPodProjection(compact bool) *podProjection {
	p := &podProjection{compact: compact}
	p.generations.Store(&[]generation{{reach: cachedReach, stamp: stampPrefix + "0"}})
	return p
}

// projections maps the Kubernetes informer factories made by NewInformerFactories to the
// projection of their pods. An embedder's factories are not in it: their pods are cached as
// the embedder wants.
var projections sync.Map

// projectionOf returns the pod projection of a factory made by NewInformerFactories.
func projectionOf(factory informers.SharedInformerFactory) *podProjection {
	p, _ := projections.Load(factory)
	pp, _ := p.(*podProjection)
	return pp
}

// transform is the informer transform of pods, which it projects and stamps, as
// podcache.Pods where the reach allows it; other objects it trims as trimForCache does.
func (p *podProjection) transform(obj any) (any, error) {
	if compact, ok := obj.(*podcache.Pod); ok {
		return compact, nil // The transform must be idempotent.
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return trimForCache(obj)
	}
	if _, projected := p.generationOf(pod); projected {
		return pod, nil
	}
	gens := *p.generations.Load()
	current := gens[len(gens)-1]
	if current.compact {
		return podcache.Compact(pod, current.stamp), nil
	}
	out := render.ProjectPod(pod, current.reach)
	out.Status.Message = current.stamp
	return out, nil
}

// generationOf returns the generation a pod was projected with.
func (p *podProjection) generationOf(pod *corev1.Pod) (generation, bool) {
	for _, g := range *p.generations.Load() {
		if pod.Status.Message == g.stamp {
			return g, true
		}
	}
	return generation{}, false
}

func (p *podProjection) appendGeneration(reach render.Reach) {
	gens := *p.generations.Load()
	next := append(slices.Clip(gens), generation{
		reach: reach, stamp: stampPrefix + strconv.Itoa(len(gens)), compact: p.compact && podcache.Covers(reach),
	})
	p.generations.Store(&next)
}

// errPodNotProjected is why a pod cannot be rendered yet.
type errPodNotProjected struct {
	pod, clusterSPIFFEID string
}

func (e errPodNotProjected) Error() string {
	return fmt.Sprintf("the cached pod %s lacks fields ClusterSPIFFEID %s can read: waiting for the pod informer to list pods with them",
		e.pod, e.clusterSPIFFEID)
}

// check returns an error when the cached pod lacks fields that one of the ClusterSPIFFEIDs
// can read, after widening the reach and asking for a new list. A pod that was not projected
// here is whole.
func (p *podProjection) check(pod *corev1.Pod, clusterSPIFFEIDs []*render.ClusterSPIFFEID) error {
	g, projected := p.generationOf(pod)
	if !projected {
		return nil
	}
	var missing *render.ClusterSPIFFEID
	for _, c := range clusterSPIFFEIDs {
		if !g.reach.Covers(c.Reach()) {
			missing = c
			break
		}
	}
	if missing == nil {
		return nil
	}
	p.widen(clusterSPIFFEIDs)
	return errPodNotProjected{pod: pod.Namespace + "/" + pod.Name, clusterSPIFFEID: missing.Name}
}

// widen makes the current reach cover every ClusterSPIFFEID, and lists pods again if that
// took a new generation.
func (p *podProjection) widen(clusterSPIFFEIDs []*render.ClusterSPIFFEID) {
	p.mu.Lock()
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
	relist := p.relist
	p.mu.Unlock()
	if grew && relist != nil {
		relist()
	}
}

// registerProjectedPodInformer registers the pod informer, watching namespace ("" for all)
// narrowed by tweak, with a watch the projection can end to list pods again. When the factory
// holds a pod informer already, pods stay whole but for managedFields.
func registerProjectedPodInformer(factory informers.SharedInformerFactory, p *podProjection, namespace string, tweak func(*metav1.ListOptions)) {
	var lw *relistingListWatch
	factory.InformerFor(&corev1.Pod{}, func(client clientset.Interface, resync time.Duration) cache.SharedIndexInformer {
		lw = newRelistingListWatch(cache.ToListerWatcherWithContext(cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				tweak(&o)
				return client.CoreV1().Pods(namespace).List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				tweak(&o)
				return client.CoreV1().Pods(namespace).Watch(ctx, o)
			},
		}, client)))
		return cache.NewSharedIndexInformer(lw, &corev1.Pod{}, resync, namespaceIndexers)
	})
	if lw != nil {
		p.mu.Lock()
		p.relist = lw.relist
		p.mu.Unlock()
	}
}

// narrowPodProjection makes the projection keep what the parent ID template and the
// ClusterSPIFFEIDs of the controller's class can read now, listed once, and returns the check
// the entry controller must make before rendering a pod. It does nothing, and returns nil,
// for factories not made by NewInformerFactories, or whose pod informer cannot list again.
// Pods a warm standby cached before it led keep their wider projection until they change.
func narrowPodProjection(ctx context.Context, cc ControllerContext) entry.PodProjectionCheck {
	p := projectionOf(cc.KubeInformers)
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.relist == nil {
		return nil
	}
	if len(*p.generations.Load()) == 1 {
		p.appendGeneration(initialReach(ctx, cc))
	}
	return p.check
}

// initialReach is what the parent ID template and the ClusterSPIFFEIDs of the controller's
// class can read, or, when they cannot be listed, all that templates can see but
// managedFields.
func initialReach(ctx context.Context, cc ControllerContext) render.Reach {
	cfg := cc.Config
	r, err := render.NewRenderer(cfg.TrustDomain, cfg.ClusterName, cfg.ClusterDomain, cfg.ParentIDTemplate)
	if err != nil || cc.SpireAPIClient == nil {
		return cachedReach
	}
	reach := r.Reach()
	list, err := cc.SpireAPIClient.SpireV1alpha1().ClusterSPIFFEIDs().List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(cfg.ClusterSPIFFEIDLabels).String(),
	})
	if err != nil {
		klog.FromContext(ctx).Error(err, "Listing ClusterSPIFFEIDs to choose the pod fields to cache: caching them all")
		return cachedReach
	}
	for i := range list.Items {
		if cfg.ClassMatches(list.Items[i].Spec.ClassName) {
			reach.Union(render.CompileClusterSPIFFEID(&list.Items[i]).Reach())
		}
	}
	return reach
}
