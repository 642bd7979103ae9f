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
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// cachedReach is what the caches keep of pods and nodes for templates: all they can see but
// managedFields. Templates of ClusterSPIFFEIDs created after start-up may read any field,
// so the cache cannot keep less without refilling itself when they do.
var cachedReach = render.FullReach()

// trimForCache keeps of each object what the controllers read (see the render projections):
// of pods their metadata, spec, phase and PodScheduled condition; of nodes their metadata and
// spec; of namespaces their labels; of EndpointSlices their Service and endpoints' targets
// and conditions; of every other object all but managedFields. A running pod's status and
// managedFields are often larger than the rest of it, and at tens of thousands of pods the
// caches are most of the process's memory. An embedding binary whose own controllers need
// more should pass factories of its own.
func trimForCache(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		return render.ProjectPod(o, cachedReach), nil
	case *corev1.Node:
		return render.ProjectNode(o, cachedReach), nil
	case *corev1.Namespace:
		return render.ProjectNamespace(o), nil
	case *discoveryv1.EndpointSlice:
		return render.ProjectEndpointSlice(o), nil
	}
	if accessor, err := meta.Accessor(obj); err == nil && accessor.GetManagedFields() != nil {
		accessor.SetManagedFields(nil)
	}
	return obj, nil
}
