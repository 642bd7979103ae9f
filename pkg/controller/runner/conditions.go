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

package runner

import (
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConditionSupport learns from the echo of a status write whether the installed CRD keeps
// status conditions. spire-controller-manager's own CRDs, which the official chart installs,
// have no status.conditions, so the API server prunes them; comparing with them would find
// every status changed and write it again at every sync, for ever. Once a write comes back
// without the conditions it carried, conditions are left out of every status, and a status
// is written only when what the schema keeps changes.
type ConditionSupport struct {
	pruned atomic.Bool
}

// Set sets a condition, unless the schema prunes conditions.
func (s *ConditionSupport) Set(conditions *[]metav1.Condition, c metav1.Condition) {
	if s.pruned.Load() {
		*conditions = nil
		return
	}
	meta.SetStatusCondition(conditions, c)
}

// Learn records that conditions are pruned when a write that carried some echoes none.
func (s *ConditionSupport) Learn(sent, echoed []metav1.Condition) {
	if len(sent) > 0 && len(echoed) == 0 {
		s.pruned.Store(true)
	}
}
