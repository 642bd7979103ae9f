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

// Package monitoring holds no code, only tests of manifests/monitoring: the alerts are checked
// and unit-tested with promtool, the dashboard and the rules name only metrics spire-registrar
// serves, and kustomize renders the directory. Without -short a real Prometheus scrapes the
// controllers running against a real kube-apiserver and spire-server, loads the rules and
// evaluates the latency query. promtool and prometheus come from Debian's prometheus package
// (hack/install-deps.sh).
package monitoring
