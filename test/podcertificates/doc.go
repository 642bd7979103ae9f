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

// Package podcertificates proves spire-registrar's pod certificate signer end to end, each
// test one scenario on real components: a kube-apiserver that authorizes nodes as a cluster
// with kubelets does (Node authorizer, NodeRestriction), a spire-server 1.15.3, a spire-agent,
// and the spire-registrar binary reaching the server over TCP with its own admin and
// downstream X509-SVID from the agent. The tests play the kubelet
// (realcluster.RequestPodCertificate, as system:node:<name>) and check what a user would:
// the request's status, the certificate as go-spiffe and openssl read it, SPIRE's bundle as
// its CLI prints it, the ClusterTrustBundle, and spire-registrar's /metrics.
package podcertificates
