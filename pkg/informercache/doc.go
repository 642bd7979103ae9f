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
// and how the controllers read pods from it. At tens of thousands of pods the caches are
// most of the process's memory, so they keep only what the controllers and the templates of
// the active ClusterSPIFFEIDs read:
//
//   - Trim, the transform of factories other controllers may share: all that templates can
//     see of pods and nodes, the labels of namespaces, the targets of EndpointSlices;
//   - PodProjection, the transform and pod informer of a factory only spire-registrar reads
//     (the standalone binary's): pods as Pods, which keep a pod's identity, labels, node and
//     service account, what nearly every template reads, in 160 bytes and share what pods
//     repeat; or, where templates read more, as Projected pods holding just that. When a
//     ClusterSPIFFEID reads a field no cached pod holds, the informer lists pods again;
//   - PodLister and View, which read a cached pod of any kind without expanding it, and
//     expand it only to render.
package informercache
