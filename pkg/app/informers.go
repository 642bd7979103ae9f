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
	"maps"
	"reflect"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	spireclientset "github.com/spire-registrar/spire-registrar/generated/clientset/versioned"
	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/informercache"
)

// namespaceIndexers are the indexers client-go's factories give every informer.
var namespaceIndexers = cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}

// narrowInformers registers, in the shared factories and before any controller asks for them,
// the informers of the pod side of the controllers (pods, namespaces, nodes, EndpointSlices and
// ClusterSPIFFEIDs), narrowed as the config says: ClusterSPIFFEIDs by
// clusterSPIFFEIDLabelSelector and filterByClassName, pods and EndpointSlices by
// cacheNamespaces. A factory returns the informer first registered for a type, so the
// controllers then get these. An embedder whose factory already holds such an informer keeps
// its own. Each one registered here can list again (see relistable), so that a new leader can
// tell when its cache has caught up with the API server.
func narrowInformers(cc ControllerContext) {
	cfg := cc.Config
	spire := cc.SpireInformers
	var clusterSPIFFEIDs func(*metav1.ListOptions)
	if len(cfg.ClusterSPIFFEIDLabels) > 0 {
		selector := labels.SelectorFromSet(cfg.ClusterSPIFFEIDLabels).String()
		clusterSPIFFEIDs = func(o *metav1.ListOptions) { o.LabelSelector = selector }
	}
	spire.InformerFor(&spirev1alpha1.ClusterSPIFFEID{}, func(client spireclientset.Interface, resync time.Duration) cache.SharedIndexInformer {
		c := client.SpireV1alpha1().ClusterSPIFFEIDs()
		return relistable(&spirev1alpha1.ClusterSPIFFEID{}, client, c.List, c.Watch, clusterSPIFFEIDs, resync)
	})
	namespace, selectors := namespaceScope(cfg.CacheNamespaces)
	tweak := func(o *metav1.ListOptions) {
		o.LabelSelector, o.FieldSelector = selectors.LabelSelector, selectors.FieldSelector
	}
	cc.KubeInformers.InformerFor(&corev1.Pod{}, func(client clientset.Interface, resync time.Duration) cache.SharedIndexInformer {
		c := client.CoreV1().Pods(namespace)
		return relistable(&corev1.Pod{}, client, c.List, c.Watch, tweak, resync)
	})
	if cc.ReadEndpoints {
		registerEndpointsAsSlicesInformer(cc.KubeInformers, namespace, tweak)
	} else {
		cc.KubeInformers.InformerFor(&discoveryv1.EndpointSlice{}, func(client clientset.Interface, resync time.Duration) cache.SharedIndexInformer {
			c := client.DiscoveryV1().EndpointSlices(namespace)
			return relistable(&discoveryv1.EndpointSlice{}, client, c.List, c.Watch, tweak, resync)
		})
	}
	cc.KubeInformers.InformerFor(&corev1.Namespace{}, func(client clientset.Interface, resync time.Duration) cache.SharedIndexInformer {
		c := client.CoreV1().Namespaces()
		return relistable(&corev1.Namespace{}, client, c.List, c.Watch, nil, resync)
	})
	cc.KubeInformers.InformerFor(&corev1.Node{}, func(client clientset.Interface, resync time.Duration) cache.SharedIndexInformer {
		c := client.CoreV1().Nodes()
		return relistable(&corev1.Node{}, client, c.List, c.Watch, nil, resync)
	})
}

// registerClusterStaticEntryInformer registers the ClusterStaticEntries' informer, able to
// list again, unless the factory holds one already.
func registerClusterStaticEntryInformer(cc ControllerContext) {
	cc.SpireInformers.InformerFor(&spirev1alpha1.ClusterStaticEntry{}, func(client spireclientset.Interface, resync time.Duration) cache.SharedIndexInformer {
		c := client.SpireV1alpha1().ClusterStaticEntries()
		return relistable(&spirev1alpha1.ClusterStaticEntry{}, client, c.List, c.Watch, nil, resync)
	})
}

// registerClusterFederatedTrustDomainInformer registers the ClusterFederatedTrustDomains'
// informer, able to list again, unless the factory holds one already.
func registerClusterFederatedTrustDomainInformer(cc ControllerContext) {
	cc.SpireInformers.InformerFor(&spirev1alpha1.ClusterFederatedTrustDomain{}, func(client spireclientset.Interface, resync time.Duration) cache.SharedIndexInformer {
		c := client.SpireV1alpha1().ClusterFederatedTrustDomains()
		return relistable(&spirev1alpha1.ClusterFederatedTrustDomain{}, client, c.List, c.Watch, nil, resync)
	})
}

// relistable is the informer of obj that a factory makes, listing and watching with list and
// watch narrowed by tweak (nil for none), except that it can be made to list again (see
// informercache.RelistableInformer). client is the clientset list and watch belong to: a fake
// one cannot stream a watch-list.
func relistable[L runtime.Object](obj runtime.Object, client any,
	list func(context.Context, metav1.ListOptions) (L, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error),
	tweak func(*metav1.ListOptions), resync time.Duration,
) cache.SharedIndexInformer {
	narrow := func(o *metav1.ListOptions) {
		if tweak != nil {
			tweak(o)
		}
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			narrow(&o)
			return list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			narrow(&o)
			return watchFn(ctx, o)
		},
	}
	return informercache.NewRelistableInformer(cache.ToListerWatcherWithContext(cache.ToListWatcherWithWatchListSemantics(lw, client)),
		obj, resync, namespaceIndexers)
}

// namespaceScope is the namespace ("" for all) and selectors the namespaced informers watch
// with for cacheNamespaces. One namespace narrows the watch to it. Several keep one
// cluster-wide watch: a watch per namespace and kind costs the API server more than the
// objects it saves, and the namespaces not listed are ignored by the controllers instead
// (config.IsNamespaceIgnored). Their selectors, which config validation requires to be the
// same for every namespace, narrow that watch.
func namespaceScope(namespaces map[string]config.NamespaceCache) (string, config.NamespaceCache) {
	switch len(namespaces) {
	case 0:
		return metav1.NamespaceAll, config.NamespaceCache{}
	case 1:
		for ns, selectors := range namespaces {
			return ns, selectors
		}
	}
	first := slices.Sorted(maps.Keys(namespaces))[0]
	return metav1.NamespaceAll, namespaces[first]
}

// cacheSyncer is what waitForCacheSync needs of an informer factory.
type cacheSyncer interface {
	WaitForCacheSync(stopCh <-chan struct{}) map[reflect.Type]bool
}

// waitForCacheSync gives the factories' started informers timeout to fill their caches
// (controller.cacheSyncTimeout), and returns an error naming those that did not. A timeout
// of 0 does not wait: the controllers wait for their own informers in any case. ctx ending
// first is not an error.
func waitForCacheSync(ctx context.Context, timeout time.Duration, factories ...cacheSyncer) error {
	if timeout <= 0 {
		return nil
	}
	syncCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var unsynced []string
	for _, f := range factories {
		for typ, synced := range f.WaitForCacheSync(syncCtx.Done()) {
			if !synced {
				unsynced = append(unsynced, typ.String())
			}
		}
	}
	if len(unsynced) == 0 || ctx.Err() != nil {
		return nil
	}
	slices.Sort(unsynced)
	return fmt.Errorf("caches of %v not synced within controller.cacheSyncTimeout %v", unsynced, timeout)
}
