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
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestConditionSupportLearnsPruning(t *testing.T) {
	var s ConditionSupport
	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Set"}

	var conditions []metav1.Condition
	s.Set(&conditions, ready)
	if len(conditions) != 1 {
		t.Fatalf("before anything is learned, Set gives %v; want the condition", conditions)
	}
	// A schema that keeps conditions echoes them: nothing is learned.
	s.Learn(conditions, conditions)
	s.Learn(nil, nil)
	if s.Set(&conditions, ready); len(conditions) != 1 {
		t.Fatalf("after echoes that kept conditions, Set gives %v", conditions)
	}
	// A write that carried conditions comes back without them: the schema prunes them.
	s.Learn(conditions, nil)
	if s.Set(&conditions, ready); conditions != nil {
		t.Errorf("after a pruned echo, Set gives %v; want no conditions, as the schema keeps", conditions)
	}
}
