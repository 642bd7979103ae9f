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
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	spireinformers "github.com/spire-registrar/spire-registrar/generated/informers/externalversions/spire/v1alpha1"
	spirelisters "github.com/spire-registrar/spire-registrar/generated/listers/spire/v1alpha1"
	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

// ClusterStaticEntries returns an informer of the directory's ClusterStaticEntries. Call it
// before Start.
func (s *Source) ClusterStaticEntries() spireinformers.ClusterStaticEntryInformer {
	return staticEntryInformer{s.newInformer(kindStaticEntry, &spirev1alpha1.ClusterStaticEntry{})}
}

// ClusterFederatedTrustDomains returns an informer of the directory's
// ClusterFederatedTrustDomains. Call it before Start.
func (s *Source) ClusterFederatedTrustDomains() spireinformers.ClusterFederatedTrustDomainInformer {
	return trustDomainInformer{s.newInformer(kindTrustDomain, &spirev1alpha1.ClusterFederatedTrustDomain{})}
}

func (s *Source) newInformer(kind string, example runtime.Object) cache.SharedIndexInformer {
	informer := cache.NewSharedIndexInformer(&listerWatcher{source: s, kind: kind}, example, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	s.informers = append(s.informers, informer)
	return informer
}

type staticEntryInformer struct{ informer cache.SharedIndexInformer }

func (i staticEntryInformer) Informer() cache.SharedIndexInformer { return i.informer }

func (i staticEntryInformer) Lister() spirelisters.ClusterStaticEntryLister {
	return spirelisters.NewClusterStaticEntryLister(i.informer.GetIndexer())
}

type trustDomainInformer struct{ informer cache.SharedIndexInformer }

func (i trustDomainInformer) Informer() cache.SharedIndexInformer { return i.informer }

func (i trustDomainInformer) Lister() spirelisters.ClusterFederatedTrustDomainLister {
	return spirelisters.NewClusterFederatedTrustDomainLister(i.informer.GetIndexer())
}

// listerWatcher lists and watches one kind of the source, as a reflector expects of an API
// server: a list at a resourceVersion, then the changes after it.
type listerWatcher struct {
	source *Source
	kind   string
}

// List returns every resource of the kind at the current version.
func (lw *listerWatcher) List(metav1.ListOptions) (runtime.Object, error) {
	s := lw.source
	s.mu.Lock()
	defer s.mu.Unlock()
	meta := metav1.ListMeta{ResourceVersion: fmt.Sprint(s.version)}
	objects := s.kinds[lw.kind].objects
	switch lw.kind {
	case kindStaticEntry:
		list := &spirev1alpha1.ClusterStaticEntryList{ListMeta: meta}
		for _, o := range objects {
			list.Items = append(list.Items, *o.obj.(*spirev1alpha1.ClusterStaticEntry).DeepCopy())
		}
		return list, nil
	default:
		list := &spirev1alpha1.ClusterFederatedTrustDomainList{ListMeta: meta}
		for _, o := range objects {
			list.Items = append(list.Items, *o.obj.(*spirev1alpha1.ClusterFederatedTrustDomain).DeepCopy())
		}
		return list, nil
	}
}

// Watch streams the changes after the list it follows. A watch from any other version is
// refused as expired, which makes the reflector list again: the source keeps no history.
func (lw *listerWatcher) Watch(options metav1.ListOptions) (watch.Interface, error) {
	s := lw.source
	s.mu.Lock()
	defer s.mu.Unlock()
	if options.ResourceVersion != fmt.Sprint(s.version) {
		return nil, apierrors.NewResourceExpired(fmt.Sprintf("static manifests changed since resourceVersion %q", options.ResourceVersion))
	}
	// Registering under the lock orders the watch after every change already sent and
	// before any change to come.
	return s.kinds[lw.kind].broadcaster.Watch()
}

// IsWatchListSemanticsUnSupported tells the reflector to list, then watch: the source cannot
// stream its initial state as watch events with a bookmark.
func (lw *listerWatcher) IsWatchListSemanticsUnSupported() bool { return true }
