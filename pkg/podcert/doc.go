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

// Package podcert is the pure logic of a PodCertificateRequest signer (certificates.k8s.io/v1)
// that issues X509-SVIDs with an intermediate CA SPIRE signed for it (see
// spire.AuthorityClient.NewDownstreamX509CA). It decides and issues; it never talks to the
// Kubernetes API or to SPIRE, so the controller gathers the inputs and writes the results.
//
// A request goes through, in order:
//
//   - CheckAnnotations: spec.unverifiedUserAnnotations holds only keys this signer knows
//     (AnnotationClusterSPIFFEID), with valid values;
//   - PublicKeyOf: the stub CSR's key is of a type this signer issues for;
//   - CheckRequest: the pod and node the request names are the ones the caller's informers
//     hold (UIDs, node binding, service account) and the pod has neither finished nor begun
//     to be deleted;
//   - CheckVolume and CheckServiceAccount: the request is one the pod's kubelet would make,
//     for a podCertificate volume of the pod, with its service account's UID;
//   - the controller renders the pod's SPIFFE ID and DNS names from the ClusterSPIFFEIDs, and
//     CheckIdentity refuses the IDs SPIRE gives no workload, the signer's own, and admin or
//     downstream identities the config does not allow;
//   - TTL and Lifetime: the validity of the certificate, from the ClusterSPIFFEID's ttl or
//     SPIRE's default, the request, the configured cap and the CA's remaining life, within
//     kube-apiserver's status validation rules;
//   - Issue: the X509-SVID and the chain written to status.certificateChain.
//
// A check that refuses returns a Decision: the Denied or Failed condition to set, with one
// of the reasons declared here.
package podcert
