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

// Package manifests holds no code, only tests: they check what `kubectl apply -k` creates from
// manifests/ (the standalone Deployment) and from manifests/sidecar (spire-registrar added to a
// SPIRE server's StatefulSet, in testdata/sidecar), from manifests/tcp-mtls and from it with the
// optional manifests/pod-certificates component (testdata/pod-certificates), and the migration
// of an official Helm chart install to TCP-mTLS (testdata/chart, testdata/tcp-mtls-from-chart),
// rendered by kustomize's own library as kubectl embeds it. Without -short they also apply the
// objects to a real kube-apiserver and run the controllers as the shipped ServiceAccount, to
// show the RBAC is both enough and no more, and run that migration on real binaries.
package manifests
