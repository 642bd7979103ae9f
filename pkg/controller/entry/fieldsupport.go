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

package entry

import (
	"sync"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"k8s.io/klog/v2"
)

// unsupportedFields are the optional entry fields the connected SPIRE server does not keep.
// Older servers drop jwtSvidTtl, hint and storeSvid; comparing them would update the same
// entries at every sync, for ever.
type unsupportedFields struct {
	jwtSVIDTTL, hint, storeSVID bool
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
	update := func(name string, flag *bool, sentSet, echoedSet bool) {
		if !sentSet {
			return
		}
		if unsupported := !echoedSet; unsupported != *flag {
			*flag = unsupported
			logger.Info("Learned whether SPIRE keeps an entry field", "field", name, "kept", !unsupported)
		}
	}
	update("jwtSvidTtl", &f.unsupported.jwtSVIDTTL, sent.GetJwtSvidTtl() != 0, echoed.GetJwtSvidTtl() != 0)
	update("hint", &f.unsupported.hint, sent.GetHint() != "", echoed.GetHint() != "")
	update("storeSvid", &f.unsupported.storeSVID, sent.GetStoreSvid(), echoed.GetStoreSvid())
}

// get returns the fields known not to be kept.
func (f *fieldSupport) get() unsupportedFields {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.unsupported
}
