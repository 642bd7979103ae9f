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

package federation

import "testing"

func TestReleasedTrustDomains(t *testing.T) {
	var r releasedTrustDomains
	if r.has("a.org") {
		t.Error("a zero set holds a.org")
	}
	r.add("a.org")
	r.add("b.org")
	r.forget("a.org", "never.org")
	if r.has("a.org") || !r.has("b.org") {
		t.Errorf("after add a, b and forget a: has(a) = %v, has(b) = %v", r.has("a.org"), r.has("b.org"))
	}
}
