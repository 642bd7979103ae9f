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
	"sync"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
)

// A resource's trustDomainBundle is a bootstrap bundle: SPIRE replaces it with what it
// fetches from the bundle endpoint as the other side rotates its keys, so the bundle SPIRE
// holds is expected to differ from the resource's copy, and writing that copy back would undo
// the rotation and break federation. The controller therefore never compares the two. It
// sends the resource's bundle when it creates the relationship, and again only when the
// resource's own bundle changes: it remembers, per trust domain, the declared bundle it last
// sent. A relationship SPIRE already holds when the controller first sees it (after a
// restart, or created by someone else) is adopted with the declared bundle as sent, so a
// restart or a swap from spire-controller-manager, which sends the bundle on create only,
// rewrites nothing. The price: a bundle edited while no controller runs is not sent.

// sentBundles is the declared bundle last sent (or adopted) per trust domain. A nil bundle
// means the relationship was created without one.
type sentBundles struct {
	mu   sync.Mutex
	byTD map[string]*spiretypes.Bundle
}

func newSentBundles() *sentBundles {
	return &sentBundles{byTD: map[string]*spiretypes.Bundle{}}
}

// get returns the bundle last sent for a trust domain, and whether there is a record.
func (s *sentBundles) get(trustDomain string) (*spiretypes.Bundle, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.byTD[trustDomain]
	return b, ok
}

// set records the bundle sent (or adopted) for a trust domain.
func (s *sentBundles) set(trustDomain string, b *spiretypes.Bundle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byTD[trustDomain] = b
}

// forget drops the record of a trust domain whose relationship is gone.
func (s *sentBundles) forget(trustDomain string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byTD, trustDomain)
}
