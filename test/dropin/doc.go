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

// Package dropin proves that spire-registrar is a drop-in for spire-controller-manager v0.7.0:
// on a full cluster (scheduler, controller-manager and kwok running Deployments and writing
// Endpoints and EndpointSlices), SPIRE 1.15.3 on PostgreSQL and spire-controller-manager's own
// CRDs, the real spire-controller-manager runs a varied workload to steady state, then
// spire-registrar takes over with the same config file, args and env, and SPIRE's own telemetry
// must count no write; rolling back must not write either, except spire-controller-manager's
// start-up probe entry. A last swap, with a completed Job pod, must write exactly the one
// deliberate difference docs/differences.md lists for it: the delete of that pod's entry.
package dropin
