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

// Package image holds no code, only tests: they build the image with hack/build-image.sh, as
// `make image` and the release workflow do, and run it with podman the way the official SPIRE
// Helm chart runs spire-controller-manager's container, against the real kube-apiserver and
// spire-server.
package image
