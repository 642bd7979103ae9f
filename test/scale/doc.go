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

// Package scale is the smoke variant of the scale bench (hack/bench, `make bench`): a small
// N of pods, K ClusterSPIFFEIDs each selecting every pod, and SPIRE on PostgreSQL as
// production runs it. It asserts correctness only, never timings: every pod has exactly K
// entries, none is duplicated, and restarting the controller with every entry in SPIRE makes
// no SPIRE write, full resyncs included. The bench measures the same scenario at the field's
// size.
//
// The test starts real binaries (kube-apiserver, etcd, PostgreSQL, spire-server) and is
// skipped with -short. Run it with
//
//	go test -count=1 -v ./test/scale/
package scale
