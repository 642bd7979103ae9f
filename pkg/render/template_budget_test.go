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
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"text/template"
	"time"

	corev1 "k8s.io/api/core/v1"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/config"
)

// allocationSlack is what one render may allocate beyond maxAllocatedBytes: text/template's
// own walk, the clone of a template on its first execution, the entry and its errors.
const allocationSlack = 256 << 10

// bigAnnotation is as large as the API server lets all of a pod's annotations be together.
const bigAnnotation = 256<<10 - 64

// hostilePod is a pod whose data is as large as a pod's may be: an annotation of 256 KiB, made
// of the characters html and js expand most, and a thousand labels.
func hostilePod() *corev1.Pod {
	pod := testPod()
	pod.Annotations = map[string]string{"big": strings.Repeat("<", bigAnnotation)}
	for i := range 1000 {
		pod.Labels[fmt.Sprintf("label-%04d", i)] = strings.Repeat("v", 63)
	}
	return pod
}

// renderAllocation renders a pod entry whose SPIFFE ID template is tmpl and returns the bytes
// the render allocated: the process's, measured around the one render, after a collection.
func renderAllocation(t testing.TB, r *Renderer, tmpl string, pod *corev1.Pod) (uint64, error) {
	t.Helper()
	clusterSPIFFEID := testClusterSPIFFEID(spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: tmpl})
	node := testNode()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := r.PodEntry(clusterSPIFFEID, pod, node, nil)
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, err
}

// args repeats arg n times, separated by spaces, for a call with n arguments.
func args(arg string, n int) string {
	return strings.TrimSpace(strings.Repeat(arg+" ", n))
}

// TestHostileTemplatesStayWithinTheMemoryBudget renders templates that build strings far
// larger than anything they can output, from a pod as large as the API server admits. Each
// must be refused, and allocate no more than the budget: the functions that build strings
// must refuse before they build, not check the length of what they built.
func TestHostileTemplatesStayWithinTheMemoryBudget(t *testing.T) {
	const big = `{{ $s := index .PodMeta.Annotations "big" }}`
	pod := hostilePod()
	r := newTestRenderer(t, config.DefaultParentIDTemplate)
	for _, tc := range []struct {
		name, template string
		// want is the error the render must fail with.
		want error
	}{
		{"printf with many big arguments", big + `{{ printf "` + strings.Repeat("%s", 100) + `" ` + args("$s", 100) + ` }}`, errMemoryExceeded},
		{"printf formatting one argument many times", big + `{{ printf "` + strings.Repeat("%[1]s", 100) + `" $s }}`, errMemoryExceeded},
		{"printf with an argument width", `{{ printf "` + strings.Repeat("%[2]*[1]d", 100) + `" 0 99999 }}`, nil},
		{"printf with an argument precision", `{{ printf "` + strings.Repeat("%.[2]*[1]d", 100) + `" 0 99999 }}`, nil},
		{"printf with a width after an index", `{{ printf "` + strings.Repeat("%.[1]99999d", 100) + `" 0 }}`, nil},
		{"nested printf", big + `{{ printf "%s%s" (printf "%s%s" $s $s) (printf "%s%s" $s $s) }}`, errMemoryExceeded},
		{"print", big + `{{ print ` + args("$s", 100) + ` }}`, errMemoryExceeded},
		{"println", big + `{{ println ` + args("$s", 100) + ` }}`, errMemoryExceeded},
		{"html of many arguments", big + `{{ html ` + args("$s", 20) + ` }}`, errMemoryExceeded},
		{"js of many arguments", big + `{{ js ` + args("$s", 20) + ` }}`, errMemoryExceeded},
		{"urlquery of many arguments", big + `{{ urlquery ` + args("$s", 20) + ` }}`, errMemoryExceeded},
		{"html escaping expands", big + `{{ html $s }}`, errOutputTooLong},
		{"js escaping expands", big + `{{ js $s }}`, errOutputTooLong},
		{"urlquery escaping expands", big + `{{ urlquery $s }}`, errOutputTooLong},
		{"escaping in a range", big + `{{ range 5000 }}{{ $x := js (slice $s 0 300) }}{{ end }}`, errMemoryExceeded},
		{"printf in a range", big + `{{ range 5000 }}{{ $x := printf "%.99s" $s }}{{ end }}`, errMemoryExceeded},
		{"index and slice in a range", big + `{{ range 5000 }}{{ $x := printf "%s" (slice (index $.PodMeta.Annotations "big") 0 2000) }}{{ end }}`, errMemoryExceeded},
		{"a variable doubled in a range", `{{ $s := "x" }}{{ range 64 }}{{ $s = printf "%s%s" $s $s }}{{ end }}`, errOutputTooLong},
		{"a big variable doubled", big + `{{ $s = printf "%s%s" $s $s }}`, errMemoryExceeded},
		{"the pod's labels printed", `{{ range 5000 }}{{ $x := printf "%.1v" $.PodMeta.Labels }}{{ end }}`, nil},
		{"the pod's metadata printed", `{{ printf "%v" .PodMeta }}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			allocated, err := renderAllocation(t, r, tc.template, pod)
			t.Logf("allocated %d KiB: %v", allocated>>10, err)
			if err == nil {
				t.Fatalf("rendered a hostile template, want it refused")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
			if allocated > maxAllocatedBytes+allocationSlack {
				t.Errorf("one render allocated %d KiB, more than the budget of %d KiB and %d KiB to spare", allocated>>10, maxAllocatedBytes>>10, allocationSlack>>10)
			}
		})
	}
}

// TestTemplateFunctionsPrintAsBefore: the budgeted functions, over the view, print what
// text/template's own print over the objects, as spire-controller-manager renders them.
func TestTemplateFunctionsPrintAsBefore(t *testing.T) {
	pod := testPod()
	pod.Labels["n"] = "<a href='x'>&=\x01é"
	prio := int32(7)
	pod.Spec.Priority = &prio
	pod.Spec.Containers = []corev1.Container{{Name: "app", Args: []string{"a", "b c"}}}
	data := scmData("example.org", pod, testNode())
	for _, text := range []string{
		`{{ printf "%s/%d/%q/%x/%5.2f/%v/%T" .PodMeta.Name 42 .PodMeta.Name .PodMeta.Name 3.14159 true .PodMeta.Name }}`,
		`{{ printf "%[2]s-%[1]s %s" "a" "b" }}{{ printf "%s" }}{{ printf "%d" "x" }}{{ printf "%s" "a" "b" 3 }}{{ printf "%!" }}`,
		`{{ printf "%.3s|%-6s|%06d|%+d|%#x|% x|%U|%c|%08.3f" "abcdef" "ab" 42 5 "hi" "hi" 0x1F600 65 3.5 }}`,
		`{{ printf "%v %d %s" (index .PodSpec.Containers 0).Args "x" .PodMeta.UID }}`,
		`{{ print "a" 1 2 "b" .PodSpec.ServiceAccountName }}|{{ println "a" 1 2 }}`,
		`{{ html (index .PodMeta.Labels "n") }}|{{ js (index .PodMeta.Labels "n") }}|{{ urlquery (index .PodMeta.Labels "n") }}`,
		`{{ html 1 "<" .PodSpec.Priority }}|{{ js .PodSpec.Priority nil }}|{{ urlquery "a b" 2 }}|{{ html }}`,
		`{{ range $k, $v := .PodMeta.Labels }}{{ printf "%s=%s;" $k $v }}{{ end }}`,
	} {
		budgeted, err := parseTemplate("t", text)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		builtin := template.Must(template.New("t").Parse(text))
		var want strings.Builder
		if err := builtin.Execute(&want, data); err != nil {
			t.Fatalf("%s: text/template: %v", text, err)
		}
		got, err := execute(budgeted, inputOf("example.org", pod, testNode()))
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		if got != want.String() {
			t.Errorf("%s:\nrendered %q\nbuiltins %q", text, got, want.String())
		}
	}
}

// FuzzTemplateMemory renders arbitrary SPIFFE ID templates over a pod as large as the API
// server admits, and fails when one render allocates more than the budget, or takes longer
// than its deadline and a scheduling slack.
func FuzzTemplateMemory(f *testing.F) {
	for _, s := range []string{
		`{{ $s := index .PodMeta.Annotations "big" }}{{ printf "%s%s%s%s" $s $s $s $s }}`,
		`{{ $s := index .PodMeta.Annotations "big" }}{{ js $s $s }}`,
		`{{ $s := "x" }}{{ range 64 }}{{ $s = printf "%s%s" $s $s }}{{ end }}`,
		`{{ range 5000 }}{{ $x := printf "%.99s" (index $.PodMeta.Annotations "big") }}{{ end }}`,
		`{{ range .PodMeta.Labels }}{{ print . . . . }}{{ end }}`,
		`{{ printf "%[1]s%[1]s%[1]s" (index .PodMeta.Annotations "big") }}`,
		`{{ urlquery .PodMeta.Annotations }}`,
		`{{ range .PodMeta.Labels }}{{ range $.PodMeta.Labels }}{{ $x := printf "%99v" $.PodMeta.Labels }}{{ end }}{{ end }}`,
		`{{ $x := (index .PodSpec.Volumes 0).EmptyDir.SizeLimit.AsDec.UnscaledBig }}{{ print .PodSpec .PodMeta .NodeMeta }}`,
	} {
		f.Add(s)
	}
	pod := hostilePod()
	r, err := NewRenderer(Settings{TrustDomain: fuzzTrustDomain, ClusterName: "demo", ClusterDomain: "cluster.local", ParentIDTemplate: config.DefaultParentIDTemplate})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, tmpl string) {
		// The first render of a shape of view builds its types, once for the process (they
		// are cached per Kubernetes type, so bounded): measure the render after it.
		_, _ = renderAllocation(t, r, tmpl, pod)
		began := time.Now()
		allocated, _ := renderAllocation(t, r, tmpl, pod)
		if took := time.Since(began); took > maxExecutionTime+time.Second {
			t.Errorf("one render of %q took %v, more than its deadline of %v", tmpl, took, maxExecutionTime)
		}
		if allocated > maxAllocatedBytes+allocationSlack {
			t.Errorf("one render of %q allocated %d KiB, more than the budget of %d KiB and %d KiB to spare",
				tmpl, allocated>>10, maxAllocatedBytes>>10, allocationSlack>>10)
		}
	})
}
