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

// Package realcluster starts real etcd, kube-apiserver and spire-server
// processes on 127.0.0.1 for integration tests and for hack/local-up.
//
// The binaries come from the per-user cache (see BinDir) and are
// built from the pinned modules under hack/tools by hack/build-tools.sh when
// missing.
//
// The Kubernetes side comes in two worlds. The light one (the default) runs
// only etcd and kube-apiserver: no scheduler, controller-manager or kubelet,
// so Nodes and bound Pods are created directly (CreateNode, CreatePod) and
// pod status is set by hand (SetPodPhase). The full one (KubeOptions.Full)
// adds kube-scheduler, kube-controller-manager and kwok: controllers make
// pods, the scheduler places them on nodes made with CreateKwokNode, and kwok
// runs them through their lives.
//
// kube-apiserver may also authorize nodes as a cluster with kubelets does
// (KubeOptions.NodeAuthorization: the Node authorizer and NodeRestriction).
// Tests then act as a node with NodeClient, and RequestPodCertificate does
// what the kubelet does for a pod's podCertificate volume: it creates a
// PodCertificateRequest as the pod's node, for a signer under test to answer
// (WaitPodCertificateIssued).
//
// spire-server runs SPIRE 1.15.3 on sqlite, or on a private PostgreSQL cluster
// (StartPostgres), where two servers may share one database as replicas do; in
// front of it, SPIREProxy can make its API answer as an older release's would
// (DropAdditionalAttributes: SPIRE 1.13's entry API). spire-controller-manager
// v0.7.0, the drop-in anchor, runs as a process too (StartSCM), on its own
// CRDs if asked (SCMCRDsDir). The SPIRE oracles (EntryShow, FederationShow)
// shell out to the real spire-server CLI so tests check the server's state
// independently of the controller's own SPIRE client. LocalAuthorityX509 and
// BundleX509Authorities drive and read the rotation of the server's X.509 CA
// the same way.
//
// A spire-agent of the same release (StartAgent) attests to a server with a
// join token over the server's TCP address, with the unix workload attestor
// and its Workload API on a socket of its own: it issues real X509-SVIDs to
// local processes, including the admin SVID that lets a controller reach the
// server's API over TCP with SPIFFE mTLS.
//
// A test runs spire-registrar itself as a process too (NewRegistrar): built once per test
// binary as a user builds it (RegistrarBinary), its output in a buffer the test reads, its
// health and metrics endpoints on loopback ports of its own. It is for tests only and has no
// Start function.
//
// Tests use NewKube, NewSPIRE, NewAgent, NewPostgres and NewSCM, which stop everything
// in t.Cleanup; other programs use the Start functions and call Stop
// themselves.
package realcluster
