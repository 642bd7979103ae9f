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

// Package informercache is what the controllers' informers keep of the objects they cache,
// and how the controllers read pods. At tens of thousands of pods the caches are most of the
// process's memory, so they keep only what the controllers read:
//
//   - NewTrim, the transform of every informer factory: of each pod one fixed set of fields
//     (render.CachedPod: its metadata, the spec fields nearly every template reads, its phase
//     and PodScheduled condition), as a *corev1.Pod whose label, annotation and node selector
//     maps pods with the same ones share; of nodes what templates see, of namespaces their
//     labels, of EndpointSlices their targets;
//   - WholePods, which reads a pod whole from the API server for a ClusterSPIFFEID whose
//     templates read more of it;
//   - PodLister, which finds cached pods by UID, namespace and node.
package informercache
