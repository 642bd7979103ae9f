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
	"strings"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
)

// joinTokenAgentPath is where SPIRE puts agents attested by join token.
const joinTokenAgentPath = "/spire/agent/join_token/"

// isJoinTokenEntry reports whether SPIRE made the entry for an agent attested with a join
// token. Such entries are the operator's, declared by no resource, and must never be deleted.
func isJoinTokenEntry(e *spiretypes.Entry) bool {
	if !strings.HasPrefix(e.GetParentId().GetPath(), joinTokenAgentPath) {
		return false
	}
	for _, s := range e.GetSelectors() {
		if s.GetType() == "spiffe_id" {
			return true
		}
	}
	return false
}
