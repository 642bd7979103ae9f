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

package metrics

import (
	"testing"

	"k8s.io/client-go/util/workqueue"
)

// reportedAdds reports the adds Registry holds for the named queue, and whether it has any.
func reportedAdds(t *testing.T, queue string) (float64, bool) {
	t.Helper()
	families, err := Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "spire_registrar_workqueue_adds_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" && l.GetValue() == queue {
					return m.GetCounter().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

// TestWorkqueueProviderIsTheBinarysChoice checks that importing the package does not make
// client-go's queues report here, and that SetWorkqueueProvider does.
func TestWorkqueueProviderIsTheBinarysChoice(t *testing.T) {
	before := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: "before-provider"})
	defer before.ShutDown()
	before.Add("a")
	if _, reported := reportedAdds(t, "before-provider"); reported {
		t.Errorf("a queue reports to Registry although no binary set the provider")
	}

	SetWorkqueueProvider()
	after := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: "after-provider"})
	defer after.ShutDown()
	after.Add("a")
	after.Add("b")
	if adds, _ := reportedAdds(t, "after-provider"); adds != 2 {
		t.Errorf("adds of a queue created after SetWorkqueueProvider = %v, want 2", adds)
	}
}
