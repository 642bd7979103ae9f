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

package reconciler

import (
	"sync"

	"k8s.io/klog/v2"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/protobuf/proto"
)

// cloneEntry deep-copies an entry, since cached and declared entries are shared.
func cloneEntry(e *spiretypes.Entry) *spiretypes.Entry {
	return proto.Clone(e).(*spiretypes.Entry)
}

// unsupportedFields are the optional entry fields the connected SPIRE server does not keep,
// one bit per row of entryFields. Older servers drop jwtSvidTtl, hint and storeSvid; comparing
// them would update the same entries at every sync, for ever.
type unsupportedFields struct {
	bits uint64
}

// has reports whether the server does not keep entryFields[i].
func (u unsupportedFields) has(i int) bool {
	return u.bits&(1<<i) != 0
}

// fieldSupport learns which optional fields the server keeps from what it echoes back after
// the controller's own writes. Unlike spire-controller-manager, which creates and deletes a
// probe entry at every start, it writes nothing of its own.
type fieldSupport struct {
	mu          sync.Mutex
	unsupported unsupportedFields
}

// learn compares an entry as sent with the server's echo of it. A field sent set and echoed
// unset is not kept by the server; one echoed set is.
func (f *fieldSupport) learn(logger klog.Logger, sent, echoed *spiretypes.Entry) {
	if sent == nil || echoed == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, field := range entryFields {
		if field.isSet == nil || !field.isSet(sent) {
			continue
		}
		if unsupported := !field.isSet(echoed); unsupported != f.unsupported.has(i) {
			f.unsupported.bits ^= 1 << i
			logger.Info("Learned whether SPIRE keeps an entry field", "field", field.name, "kept", !unsupported)
		}
	}
}

// get returns the fields known not to be kept.
func (f *fieldSupport) get() unsupportedFields {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.unsupported
}
