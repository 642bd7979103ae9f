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

package render

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

func TestCompiledClusterSPIFFEIDs(t *testing.T) {
	in := &spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "u1", Generation: 1, CreationTimestamp: metav1.Unix(100, 0)},
		Spec:       spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/web"},
	}
	c := NewCompiledClusterSPIFFEIDs()
	first := c.Get(in)
	statusOnly := in.DeepCopy()
	statusOnly.Status.Stats.PodsSelected = 3
	if c.Get(statusOnly) != first {
		t.Error("a status change recompiled the ClusterSPIFFEID")
	}
	for name, change := range map[string]func(*spirev1alpha1.ClusterSPIFFEID){
		"generation": func(o *spirev1alpha1.ClusterSPIFFEID) { o.Generation = 2 },
		"uid":        func(o *spirev1alpha1.ClusterSPIFFEID) { o.UID = "u2" },
		"deletion":   func(o *spirev1alpha1.ClusterSPIFFEID) { o.DeletionTimestamp = &metav1.Time{Time: time.Unix(200, 0)} },
	} {
		changed := in.DeepCopy()
		change(changed)
		if c.Get(changed) == first {
			t.Errorf("a new %s kept the old compiled form", name)
		}
		c.Get(in) // back to the first, for the next case
	}
	c.Forget("web")
	if c.Get(in) == first {
		t.Error("a forgotten ClusterSPIFFEID kept its compiled form")
	}

	older := &spirev1alpha1.ClusterSPIFFEID{ObjectMeta: metav1.ObjectMeta{Name: "old", UID: "u0", CreationTimestamp: metav1.Unix(50, 0)}}
	other := &spirev1alpha1.ClusterSPIFFEID{ObjectMeta: metav1.ObjectMeta{Name: "theirs"}, Spec: spirev1alpha1.ClusterSPIFFEIDSpec{ClassName: "other"}}
	active := c.Active([]*spirev1alpha1.ClusterSPIFFEID{in, other, older}, func(class string) bool { return class == "" })
	if len(active) != 2 || active[0].Name != "old" || active[1].Name != "web" {
		t.Errorf("Active = %v, want old then web, without another class's", names(active))
	}
}

func names(cs []*ClusterSPIFFEID) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}
