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

// Package render turns what the cluster declares into the SPIRE entries it asks for:
// ClusterSPIFFEIDs compiled once, their templates rendered for a pod, its node and the
// EndpointSlices that target it, and ClusterStaticEntries validated into literal entries.
//
// It is pure: no informer, no client, no clock. Everything is passed in, so the controller,
// an admission webhook and an explain command render the same entries from the same inputs.
// Every error names the field it is in, since it ends up where a person reads it.
package render
