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
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/spire-registrar/spire-registrar/pkg/metrics"
)

// WholePods reads pods whole from the API server, for the ClusterSPIFFEIDs whose templates
// read fields the cache does not keep (render.ClusterSPIFFEID.ReadsUncachedPodFields): one GET
// of one pod, through the client's rate limiter, each time such a pod is rendered.
type WholePods struct {
	client corev1client.PodsGetter
}

// NewWholePods returns a reader of whole pods through client; nil reads none (see Get).
func NewWholePods(client corev1client.PodsGetter) *WholePods {
	return &WholePods{client: client}
}

// errNoClient is the error of a WholePods without a client.
var errNoClient = errors.New("no Kubernetes client to read it with")

// Get reads whole the pod of which cached is the cached version: at that version or a newer
// one, which the API server serves from its watch cache. It reports false when the API server
// no longer holds that pod (not found, or another pod of the same name): it is gone. The pod
// comes without managedFields, which templates never see.
func (w *WholePods) Get(ctx context.Context, cached *corev1.Pod) (*corev1.Pod, bool, error) {
	if w == nil || w.client == nil {
		return nil, false, fmt.Errorf("reading pod %s/%s whole: %w", cached.Namespace, cached.Name, errNoClient)
	}
	pod, err := w.client.Pods(cached.Namespace).Get(ctx, cached.Name, metav1.GetOptions{ResourceVersion: cached.ResourceVersion})
	switch {
	case apierrors.IsNotFound(err):
		metrics.WholePodReads.WithLabelValues("not_found").Inc()
		return nil, false, nil
	case err != nil:
		metrics.WholePodReads.WithLabelValues("error").Inc()
		return nil, false, fmt.Errorf("reading pod %s/%s whole: %w", cached.Namespace, cached.Name, err)
	}
	metrics.WholePodReads.WithLabelValues("found").Inc()
	if pod.UID != cached.UID {
		return nil, false, nil
	}
	pod.ManagedFields = nil
	return pod, true, nil
}
