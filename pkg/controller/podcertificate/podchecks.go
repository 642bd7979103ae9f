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

package podcertificate

import (
	"context"
	"fmt"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	clientset "k8s.io/client-go/kubernetes"

	"github.com/spire-registrar/spire-registrar/pkg/podcert"
)

const (
	// podSourcesCacheSize bounds how many pods' podCertificate sources are kept, and
	// podSourcesTTL how long: a pod's volumes never change, so the bound is only on memory.
	podSourcesCacheSize = 4096
	podSourcesTTL       = time.Hour
	// serviceAccountCacheSize bounds how many service accounts' UIDs are kept, and
	// serviceAccountTTL how long one is trusted before it is read again.
	serviceAccountCacheSize = 1024
	serviceAccountTTL       = time.Minute
)

// podLookups reads what the informers do not hold of a request's pod and service account,
// from the API server, with a cache: the pod's podCertificate sources (the pod cache keeps no
// volumes) and the service account's UID (nothing watches service accounts). Both are gets of
// one object; neither lists.
type podLookups struct {
	client          clientset.Interface
	sources         *utilcache.LRUExpireCache // pod UID → []corev1.PodCertificateProjection
	serviceAccounts *utilcache.LRUExpireCache // namespace/name → types.UID
}

func newPodLookups(client clientset.Interface) *podLookups {
	return &podLookups{
		client:          client,
		sources:         utilcache.NewLRUExpireCache(podSourcesCacheSize),
		serviceAccounts: utilcache.NewLRUExpireCache(serviceAccountCacheSize),
	}
}

// check returns the decision to deny a request that CheckRequest passed but that its pod's
// kubelet would not have made: the pod mounts no podCertificate volume for it, its
// service account's UID is not the request's, or the API server's pod is being deleted.
// It returns an error when the API server's pod is not the one the informer holds yet.
func (l *podLookups) check(ctx context.Context, req *certificatesv1.PodCertificateRequest) (*podcert.Decision, error) {
	sources, d, err := l.podSources(ctx, req)
	if err != nil || d != nil {
		return d, err
	}
	if d := podcert.CheckVolume(req, sources); d != nil {
		return d, nil
	}
	key := req.Namespace + "/" + req.Spec.ServiceAccountName
	if uid, ok := l.serviceAccounts.Get(key); ok && uid.(types.UID) == req.Spec.ServiceAccountUID {
		return nil, nil
	}
	// Not cached, or cached with another UID: the service account may have been replaced since.
	sa, err := l.client.CoreV1().ServiceAccounts(req.Namespace).Get(ctx, req.Spec.ServiceAccountName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		l.serviceAccounts.Remove(key)
		return podcert.CheckServiceAccount(req, "", false), nil
	case err != nil:
		return nil, fmt.Errorf("reading service account %s: %w", key, err)
	}
	l.serviceAccounts.Add(key, sa.UID, serviceAccountTTL)
	return podcert.CheckServiceAccount(req, sa.UID, true), nil
}

// podSources returns the podCertificate sources of the request's pod, read from the API
// server when not cached. A pod the API server holds as being deleted is denied.
func (l *podLookups) podSources(ctx context.Context, req *certificatesv1.PodCertificateRequest) ([]corev1.PodCertificateProjection, *podcert.Decision, error) {
	if sources, ok := l.sources.Get(req.Spec.PodUID); ok {
		return sources.([]corev1.PodCertificateProjection), nil, nil
	}
	pod, err := l.client.CoreV1().Pods(req.Namespace).Get(ctx, req.Spec.PodName, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, nil, fmt.Errorf("reading pod %s/%s: %w", req.Namespace, req.Spec.PodName, err)
	}
	if err != nil || pod.UID != req.Spec.PodUID {
		// The informer held the request's pod: it will catch up, and CheckRequest denies then.
		return nil, nil, errInformerLag
	}
	if pod.DeletionTimestamp != nil {
		return nil, podcert.DenyDeleting(req), nil
	}
	sources := podcert.PodCertificateSources(pod)
	l.sources.Add(pod.UID, sources, podSourcesTTL)
	return sources, nil, nil
}
