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

package entry

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// PodProjectionCheck returns an error when a cached pod lacks fields that one of the
// ClusterSPIFFEIDs' templates can read.
type PodProjectionCheck func(pod *corev1.Pod, clusterSPIFFEIDs []*render.ClusterSPIFFEID) error

// checkPodProjection returns an error when the cached pod cannot be rendered yet by the
// ClusterSPIFFEIDs (see Options.CheckPodProjection).
func (c *Controller) checkPodProjection(pod *corev1.Pod, clusterSPIFFEIDs []*render.ClusterSPIFFEID) error {
	if c.opts.CheckPodProjection == nil {
		return nil
	}
	return c.opts.CheckPodProjection(pod, clusterSPIFFEIDs)
}
