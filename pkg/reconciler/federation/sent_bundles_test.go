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

import (
	"testing"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
)

func TestSentBundles(t *testing.T) {
	s := newSentBundles()
	if b, ok := s.get("a.org"); ok || b != nil {
		t.Errorf("get of an unknown trust domain = %v, %v", b, ok)
	}
	// A relationship created without a bundle is a record too: adding one later is a change.
	s.set("a.org", nil)
	if b, ok := s.get("a.org"); !ok || b != nil {
		t.Errorf("get after set(nil) = %v, %v; want nil, true", b, ok)
	}
	sent := &spiretypes.Bundle{TrustDomain: "b.org", SequenceNumber: 3}
	s.set("b.org", sent)
	if b, ok := s.get("b.org"); !ok || b != sent {
		t.Errorf("get(b.org) = %v, %v", b, ok)
	}
	s.forget("b.org")
	if _, ok := s.get("b.org"); ok {
		t.Error("b.org still recorded after forget")
	}
}
