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
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	spireclientset "github.com/spire-registrar/spire-registrar/generated/clientset/versioned"
	spireinformersv1alpha1 "github.com/spire-registrar/spire-registrar/generated/informers/externalversions/spire/v1alpha1"
	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/config"
)

// namespaceIndexers are the indexers client-go's factories give every informer.
var namespaceIndexers = cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}

// narrowInformers registers, in the shared factories and before any controller asks for them,
// the informers the config narrows: ClusterSPIFFEIDs by clusterSPIFFEIDLabelSelector and
// filterByClassName, pods and EndpointSlices by cacheNamespaces. A factory returns the
// informer first registered for a type, so the controllers then get these. An embedder whose
// factory already holds such an informer keeps its own. When pods are projected, the pod
// informer is always registered here, so that it can list again when the projection widens.
func narrowInformers(cc ControllerContext) {
	cfg := cc.Config
	if len(cfg.ClusterSPIFFEIDLabels) > 0 {
		selector := labels.SelectorFromSet(cfg.ClusterSPIFFEIDLabels).String()
		cc.SpireInformers.InformerFor(&spirev1alpha1.ClusterSPIFFEID{}, func(client spireclientset.Interface, resync time.Duration) cache.SharedIndexInformer {
			return spireinformersv1alpha1.NewFilteredClusterSPIFFEIDInformer(client, resync, namespaceIndexers,
				func(o *metav1.ListOptions) { o.LabelSelector = selector })
		})
	}
	namespace, selectors := namespaceScope(cfg.CacheNamespaces)
	narrowed := namespace != "" || selectors != (config.NamespaceCache{})
	tweak := func(o *metav1.ListOptions) {
		o.LabelSelector, o.FieldSelector = selectors.LabelSelector, selectors.FieldSelector
	}
	if cc.PodProjection != nil {
		cc.PodProjection.RegisterInformer(cc.KubeInformers, namespace, tweak)
	} else if narrowed {
		cc.KubeInformers.InformerFor(&corev1.Pod{}, func(client clientset.Interface, resync time.Duration) cache.SharedIndexInformer {
			return coreinformers.NewFilteredPodInformer(client, namespace, resync, namespaceIndexers, tweak)
		})
	}
	if cc.ReadEndpoints {
		registerEndpointsAsSlicesInformer(cc.KubeInformers, namespace, tweak)
	} else if narrowed {
		cc.KubeInformers.InformerFor(&discoveryv1.EndpointSlice{}, func(client clientset.Interface, resync time.Duration) cache.SharedIndexInformer {
			return discoveryinformers.NewFilteredEndpointSliceInformer(client, namespace, resync, namespaceIndexers, tweak)
		})
	}
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
