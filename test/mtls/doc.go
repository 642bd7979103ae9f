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

// Package mtls proves the standalone topology over TCP with SPIFFE mTLS: the spire-registrar
// binary, with spireServerAddress and a real spire-agent's Workload API (join token, unix
// workload attestor), registers pods through the server's TCP API with its own admin
// X509-SVID; a workload whose SVID no admin entry issued is refused; an SVID rotation does not
// interrupt reconciling; and an entry spire-registrar created from a ClusterStaticEntry makes
// the agent issue a real X509-SVID to a local process, until the resource is deleted.
package mtls
