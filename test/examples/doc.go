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

// Package examples holds no code, only tests: they prove that every example in
// manifests/examples is valid and does what its comments say. Every YAML document there is
// decoded; config files must be accepted by pkg/config; every other object is applied to a
// real kube-apiserver, which must store every field as declared; the controllers run in-process
// with manifests/examples/config.yaml against a real spire-server, and the real spire-server
// CLI must show each example's entries and federation relationships, while the resources that
// have conditions report Ready. What SPIRE must hold is written out in the test, entry by
// entry, as a user reads it from the examples' comments; the test never works it out from the
// templates itself.
package examples
