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

// Package scenarios runs spire-registrar in the full world of pkg/testing/realcluster: pods
// come from Deployments, Jobs and StatefulSets, kube-scheduler places them on kwok's nodes,
// kube-controller-manager writes EndpointSlices, deletes namespaces and garbage-collects pods of
// deleted nodes, and SPIRE keeps its entries in PostgreSQL. Each scenario ends by checking that
// SPIRE holds exactly one entry for every pod that runs, and nothing else.
//
// The tests start real binaries and are skipped with -short. They share one world, started by
// the first of them and stopped when the package's tests end; each runs in its own namespace
// with a ClusterSPIFFEID of its own. The status churn scenario counts every write SPIRE makes,
// so it runs first and alone; the others take turns, next to the node deletion, which mostly
// waits for kube-controller-manager's pod garbage collector. Run one with, for example,
//
//	go test -count=1 -v -run TestDeploymentRollout ./test/scenarios/
package scenarios
