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
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/config"
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

// TestCompilingDoesNotHoldUpOtherReaders holds the compilation of one ClusterSPIFFEID at a
// gate and reads another, compiled before, meanwhile: the read must not wait for the gate.
func TestCompilingDoesNotHoldUpOtherReaders(t *testing.T) {
	c := NewCompiledClusterSPIFFEIDs()
	ready := &spirev1alpha1.ClusterSPIFFEID{ObjectMeta: metav1.ObjectMeta{Name: "ready", UID: "u1"},
		Spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: nsSATemplate}}
	compiled := c.Get(ready)
	slow := &spirev1alpha1.ClusterSPIFFEID{ObjectMeta: metav1.ObjectMeta{Name: "slow", UID: "u2"},
		Spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: nsSATemplate}}
	entered, release := make(chan struct{}), make(chan struct{})
	c.compile = func(in *spirev1alpha1.ClusterSPIFFEID) *ClusterSPIFFEID {
		close(entered)
		<-release
		return CompileClusterSPIFFEID(in)
	}
	done := make(chan *ClusterSPIFFEID)
	go func() { done <- c.Get(slow) }()
	<-entered
	read := make(chan *ClusterSPIFFEID)
	go func() {
		read <- c.Active([]*spirev1alpha1.ClusterSPIFFEID{ready}, func(string) bool { return true })[0]
	}()
	select {
	case got := <-read:
		if got != compiled {
			t.Error("the read recompiled a current ClusterSPIFFEID")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reading a compiled ClusterSPIFFEID waited for another's compilation")
	}
	close(release)
	if got := <-done; got.Err != nil {
		t.Errorf("the held compilation failed: %v", got.Err)
	}
}

// bigObject is a ClusterSPIFFEID at the caps of one object: as many templates as it may
// have, as long as they may be together.
func bigObject(name string) *spirev1alpha1.ClusterSPIFFEID {
	selectors := make([]string, maxObjectTemplates-1)
	each := (maxObjectTemplateBytes - len(nsSATemplate)) / len(selectors)
	for i := range selectors {
		selectors[i] = "k8s:x:" + strings.Repeat("{{(.PodMeta.Name)}}", (each-6)/19)
	}
	return &spirev1alpha1.ClusterSPIFFEID{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name)},
		Spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: nsSATemplate, WorkloadSelectorTemplates: selectors}}
}

// TestObjectCaps: an object past a cap of one object is refused at admission with one error,
// and renders nothing, without parsing a template; objects past the cap of all objects render
// nothing until others make room.
func TestObjectCaps(t *testing.T) {
	tooMany := bigObject("too-many")
	tooMany.Spec.DNSNameTemplates = []string{"x.example.org"}
	tooLong := bigObject("too-long")
	size := len(tooLong.Spec.SPIFFEIDTemplate)
	for _, text := range tooLong.Spec.WorkloadSelectorTemplates {
		size += len(text)
	}
	tooLong.Spec.WorkloadSelectorTemplates[0] += strings.Repeat("x", maxObjectTemplateBytes-size+1)
	for _, obj := range []*spirev1alpha1.ClusterSPIFFEID{tooMany, tooLong} {
		if errs := ValidateClusterSPIFFEID(obj, "example.org"); len(errs) != 1 {
			t.Errorf("%s: admission gave %d errors, want one: %v", obj.Name, len(errs), errs)
		}
		c := CompileClusterSPIFFEID(obj)
		if c.Err == nil || c.spiffeID != nil {
			t.Errorf("%s: compiled, want refused without parsing", obj.Name)
		}
	}
	if errs := ValidateClusterSPIFFEID(bigObject("at-the-caps"), "example.org"); len(errs) != 0 {
		t.Errorf("an object at the caps was refused: %v", errs)
	}

	c := NewCompiledClusterSPIFFEIDs()
	fits := maxCompiledBytes / mustCost(t, bigObject("x"))
	for i := range fits {
		if got := c.Get(bigObject(fmt.Sprint(i))); got.Err != nil {
			t.Fatalf("object %d of %d that fit was refused: %v", i, fits, got.Err)
		}
	}
	over := c.Get(bigObject("over"))
	if over.Err == nil || !strings.Contains(over.Err.Error(), "renders nothing") {
		t.Fatalf("the object past the cap of all objects compiled: %v", over.Err)
	}
	if _, err := newTestRenderer(t, config.DefaultParentIDTemplate).PodEntry(over, testPod(), testNode(), nil); err == nil {
		t.Error("the object past the cap rendered an entry")
	}
	c.Forget("0")
	if got := c.Get(bigObject("over2")); got.Err != nil {
		t.Errorf("an object that fits after another was removed was refused: %v", got.Err)
	}
}

func mustCost(t *testing.T, obj *spirev1alpha1.ClusterSPIFFEID) int {
	t.Helper()
	cost, err := templatesCost(&obj.Spec)
	if err != nil {
		t.Fatal(err)
	}
	return cost
}

// TestCompiledCostBoundsWhatTemplatesKeep parses templates of the shapes that keep the most
// for their size, and checks that what they keep stays under the cost charged for them.
func TestCompiledCostBoundsWhatTemplatesKeep(t *testing.T) {
	for _, text := range []string{
		"x", "{{ .PodMeta.Name }}", maxWorkTemplate(maxTemplateBytes),
		strings.Repeat("{{((((((((1))))))))}}", maxTemplateBytes/21), strings.Repeat("{{ 1 }}", maxTemplateBytes/7),
		strings.Repeat("{{$}}", maxTemplateBytes/5), strings.Repeat("{{.A.B.C.D}}", maxTemplateBytes/12),
		strings.Repeat("{{1|len}}", maxTemplateBytes/9), strings.Repeat("{{if 1}}{{end}}", maxTemplateBytes/15),
		strings.Repeat(`{{range 1}}{{range 1}}{{end}}{{end}}`, maxTemplateBytes/36),
	} {
		const n = 50
		keep := make([]*compiledTemplate, 0, n)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for range n {
			c, err := parseTemplate("t", text)
			if err != nil {
				t.Fatal(err)
			}
			keep = append(keep, c)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		kept := int(after.HeapAlloc-before.HeapAlloc) / n
		if charged := compiledTemplateCost + compiledByteCost*len(text); kept > charged {
			t.Errorf("a template of %d bytes (%.40q) keeps %d bytes, more than the %d charged", len(text), text, kept, charged)
		}
		runtime.KeepAlive(keep)
	}
}

// TestObjectTemplatesShareOneBudget: the templates of one object spend one budget, at
// admission as when an entry is rendered, and admission says so once, not for every template
// after the one that spent it.
func TestObjectTemplatesShareOneBudget(t *testing.T) {
	// Each template alone is within the budget; together they are not.
	loop := `k8s:x:{{ range 300 }}{{ $x := print 1 }}{{ end }}`
	obj := &spirev1alpha1.ClusterSPIFFEID{ObjectMeta: metav1.ObjectMeta{Name: "shared", UID: "u"},
		Spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: nsSATemplate, WorkloadSelectorTemplates: []string{loop, loop, loop, loop, loop, loop}}}
	alone := &spirev1alpha1.ClusterSPIFFEID{ObjectMeta: metav1.ObjectMeta{Name: "alone", UID: "u"},
		Spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: nsSATemplate, WorkloadSelectorTemplates: []string{loop}}}
	if errs := ValidateClusterSPIFFEID(alone, "example.org"); len(errs) != 0 {
		t.Fatalf("one template within the budget was refused: %v", errs)
	}
	errs := ValidateClusterSPIFFEID(obj, "example.org")
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "would allocate more than") {
		t.Errorf("admission gave %v, want one error saying the templates spend more than the budget", errs)
	}
	r := newTestRenderer(t, config.DefaultParentIDTemplate)
	if _, err := r.PodEntry(CompileClusterSPIFFEID(alone), testPod(), testNode(), nil); err != nil {
		t.Errorf("one template within the budget failed to render: %v", err)
	}
	if _, err := r.PodEntry(CompileClusterSPIFFEID(obj), testPod(), testNode(), nil); err == nil || !strings.Contains(err.Error(), "would allocate more than") {
		t.Errorf("templates past the budget together rendered: %v", err)
	}
}
