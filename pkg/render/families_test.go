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
	"bufio"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/config"
)

// The tests below try families of hostile input rather than single instances: every function
// a template can call, every method the objects templates used to see offer, loops over the
// largest labels and annotations a pod may have, recursion, and objects full of templates.
// Each case measures the process's peak resident memory (VmHWM, reset before the case) and its
// time, fails past the bounds below, and then checks that an ordinary render still works.

const (
	// familyPeakBound is the most one case may add to the process's peak memory: a render
	// allocates at most 1 MiB, the objects it reads are the test's own, and the rest is the
	// garbage collector's headroom.
	familyPeakBound = 64 << 20
	// familyTimeBound is the most one case may take, far above a real render's microseconds
	// and far below the seconds the unbounded forms took.
	familyTimeBound = 3 * time.Second
)

// peakTracker measures the peak resident memory of a piece of work.
type peakTracker struct{ supported bool }

func newPeakTracker(t *testing.T) peakTracker {
	t.Helper()
	_, err := os.Stat("/proc/self/clear_refs")
	return peakTracker{supported: err == nil}
}

// measure runs work after resetting the peak, and returns how far the peak rose above the
// resident memory at the start, and how long the work took.
func (p peakTracker) measure(t *testing.T, work func()) (rise int64, took time.Duration) {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	if p.supported {
		if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
			p.supported = false
		}
	}
	start := procStatus(t, "VmRSS")
	began := time.Now()
	work()
	took = time.Since(began)
	if !p.supported {
		return 0, took
	}
	return procStatus(t, "VmHWM") - start, took
}

// procStatus reads a field of /proc/self/status in bytes.
func procStatus(t *testing.T, field string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		name, value, ok := strings.Cut(s.Text(), ":")
		if !ok || name != field {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			t.Fatalf("reading %s: %v", field, err)
		}
		return kb << 10
	}
	return 0
}

// familyPod is as large as a pod may be where templates can reach: an annotation of 256 KiB of
// the characters the escapers expand most, a thousand labels, and the quantities and times whose
// methods the old template data offered.
func familyPod() *corev1.Pod {
	pod := hostilePod()
	limit := resource.MustParse("1Gi")
	pod.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}}}}
	pod.Spec.Containers = []corev1.Container{{Name: "app", Image: "registry.example/app:1", Resources: corev1.ResourceRequirements{
		Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: limit}}}}
	pod.CreationTimestamp = metav1.NewTime(time.Unix(1700000000, 0))
	return pod
}

// familyCase is one member of a family: a template, or a whole object.
type familyCase struct {
	name string
	spec spirev1alpha1.ClusterSPIFFEIDSpec
}

// runFamily renders each case over pod, through validation and rendering, and checks the
// bounds and that an ordinary render still works afterwards.
func runFamily(t *testing.T, family string, pod *corev1.Pod, cases []familyCase) {
	t.Helper()
	r := newTestRenderer(t, config.DefaultParentIDTemplate)
	tracker := newPeakTracker(t)
	ordinary := testClusterSPIFFEID(spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: nsSATemplate})
	var worstRise int64
	var worstTime time.Duration
	var worst string
	for _, tc := range cases {
		obj := &spirev1alpha1.ClusterSPIFFEID{ObjectMeta: metav1.ObjectMeta{Name: "hostile", UID: "u"}, Spec: tc.spec}
		rise, took := tracker.measure(t, func() {
			_ = ValidateClusterSPIFFEID(obj, "example.org")
			c := CompileClusterSPIFFEID(obj)
			_, _ = r.PodEntry(c, pod, testNode(), nil)
		})
		if rise > worstRise || took > worstTime {
			worst = tc.name
		}
		worstRise, worstTime = max(worstRise, rise), max(worstTime, took)
		if rise > familyPeakBound {
			t.Errorf("%s: peak memory rose %d MiB, more than %d MiB", tc.name, rise>>20, familyPeakBound>>20)
		}
		if took > familyTimeBound {
			t.Errorf("%s: took %v, more than %v", tc.name, took, familyTimeBound)
		}
		if _, err := r.PodEntry(ordinary, testPod(), testNode(), nil); err != nil {
			t.Fatalf("after %s, an ordinary render fails: %v", tc.name, err)
		}
	}
	t.Logf("family %s: %d cases, worst peak rise %d KiB, worst time %v (worst case %s)", family, len(cases), worstRise>>10, worstTime, worst)
}

func idOnly(name, tmpl string) familyCase {
	return familyCase{name: name, spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: tmpl}}
}

// TestFamilyBuiltins calls every function a template has, each in a loop over the pod's labels
// with the largest arguments the pod offers.
func TestFamilyBuiltins(t *testing.T) {
	const big = `(index $.PodMeta.Annotations "big")`
	calls := map[string]string{
		"printf":   `printf "%q%x%99.99v" ` + big + " " + big + " $.PodMeta.Labels",
		"print":    "print " + big + " $.PodMeta.Labels $.PodSpec",
		"println":  "println " + big + " " + big,
		"html":     "html " + big,
		"js":       "js " + big,
		"urlquery": "urlquery " + big,
		"len":      "len " + big,
		"index":    `index $.PodMeta.Labels "label-0001"`,
		"slice":    "slice " + big + " 1 1000",
		"eq":       "eq " + big + " " + big,
		"ne":       "ne " + big + " " + big,
		"lt":       "lt " + big + " " + big,
		"le":       "le " + big + " " + big,
		"gt":       "gt " + big + " " + big,
		"ge":       "ge " + big + " " + big,
		"and":      "and " + big + " " + big,
		"or":       "or " + big + " " + big,
		"not":      "not " + big,
		"call":     "call $.PodMeta.Labels",
	}
	var cases []familyCase
	for name, call := range calls {
		cases = append(cases,
			idOnly(name+" once", fmt.Sprintf(`spiffe://example.org/{{ %s }}`, call)),
			idOnly(name+" in a loop", fmt.Sprintf(`spiffe://example.org/x{{ range $.PodMeta.Labels }}{{ $x := %s }}{{ end }}`, call)),
			idOnly(name+" in nested loops", fmt.Sprintf(`spiffe://example.org/x{{ range $.PodMeta.Labels }}{{ range $.PodMeta.Labels }}{{ $x := %s }}{{ end }}{{ end }}`, call)))
	}
	runFamily(t, "builtins", familyPod(), cases)
}

// oldViewPaths are template expressions reaching each kind of value the old template data (the
// Kubernetes objects themselves) offered methods on.
var oldViewPaths = map[string]reflect.Type{
	".PodMeta":                      reflect.TypeFor[*metav1.ObjectMeta](),
	".PodSpec":                      reflect.TypeFor[*corev1.PodSpec](),
	".NodeMeta":                     reflect.TypeFor[*metav1.ObjectMeta](),
	".NodeSpec":                     reflect.TypeFor[*corev1.NodeSpec](),
	".PodMeta.CreationTimestamp":    reflect.TypeFor[*metav1.Time](),
	"(index .PodSpec.Containers 0)": reflect.TypeFor[*corev1.Container](),
	"(index .PodSpec.Volumes 0).EmptyDir.SizeLimit": reflect.TypeFor[*resource.Quantity](),
}

// oldViewMethodCases calls every method of the types the old template data reached, with the
// largest arguments of each kind: integers of 2^24, and the same value where one of its own
// type is expected.
func oldViewMethodCases() []familyCase {
	paths := map[string]reflect.Type{}
	for p, typ := range oldViewPaths {
		paths[p] = typ
	}
	q := reflect.TypeFor[*resource.Quantity]()
	asDec, _ := q.MethodByName("AsDec")
	paths["(index .PodSpec.Volumes 0).EmptyDir.SizeLimit.AsDec"] = asDec.Type.Out(0)
	unscaled, _ := asDec.Type.Out(0).MethodByName("UnscaledBig")
	paths["(index .PodSpec.Volumes 0).EmptyDir.SizeLimit.AsDec.UnscaledBig"] = unscaled.Type.Out(0)
	var cases []familyCase
	for path, typ := range paths {
		for i := range typ.NumMethod() {
			m := typ.Method(i)
			args, ok := methodArgs(m.Type, typ, path)
			if !ok {
				continue
			}
			call := path + "." + m.Name
			if args != "" {
				call = "(" + call + " " + args + ")"
			}
			cases = append(cases, idOnly(path+"."+m.Name, "spiffe://example.org/x{{ $x := "+call+" }}"))
		}
	}
	return cases
}

// methodArgs writes the arguments of a call of a method of typ at path; false when one cannot
// be written in a template.
func methodArgs(mt, typ reflect.Type, path string) (string, bool) {
	var args []string
	for i := 1; i < mt.NumIn(); i++ {
		switch in := mt.In(i); {
		case in == typ:
			args = append(args, path)
		case in.Kind() >= reflect.Int && in.Kind() <= reflect.Uint64:
			args = append(args, strconv.Itoa(1<<24))
		case in.Kind() == reflect.String:
			args = append(args, `"x"`)
		case in.Kind() == reflect.Bool:
			args = append(args, "true")
		default:
			return "", false
		}
	}
	return strings.Join(args, " "), true
}

// TestFamilyOldViewMethods calls every method the old template data offered.
func TestFamilyOldViewMethods(t *testing.T) {
	runFamily(t, "old view methods", familyPod(), oldViewMethodCases())
}

// TestFamilyLoopsAndRecursion ranges over the largest labels and annotations, nests the
// loops, and recurses through define and template.
func TestFamilyLoopsAndRecursion(t *testing.T) {
	pod := familyPod()
	for i := range 4000 {
		pod.Annotations[fmt.Sprintf("a-%05d", i)] = "v"
	}
	var cases []familyCase
	for depth := 1; depth <= 4; depth++ {
		for _, m := range []string{"Labels", "Annotations"} {
			open := strings.Repeat("{{ range $.PodMeta."+m+" }}", depth)
			cases = append(cases,
				idOnly(fmt.Sprintf("range %s depth %d", m, depth), "spiffe://example.org/x"+open+strings.Repeat("{{ end }}", depth)),
				idOnly(fmt.Sprintf("range %s depth %d breaking", m, depth), "spiffe://example.org/x"+open+"{{ break }}"+strings.Repeat("{{ end }}", depth)))
		}
	}
	for _, n := range []int{10, 15, 19} {
		cases = append(cases, idOnly(fmt.Sprintf("exponential recursion %d", n), exponentialTemplate(n)))
	}
	cases = append(cases,
		idOnly("deep recursion", `{{ define "loop" }}{{ template "loop" . }}{{ end }}spiffe://example.org/{{ template "loop" . }}`),
		idOnly("recursion with the pod", `{{ define "loop" }}{{ range .PodMeta.Labels }}{{ end }}{{ template "loop" $ }}{{ end }}spiffe://example.org/{{ template "loop" . }}`))
	runFamily(t, "loops and recursion", pod, cases)
}

// maxWorkTemplate is a template of about size bytes that does the most work it can: nested
// ranges over the labels, each building the largest string it may.
func maxWorkTemplate(size int) string {
	body := `{{ range $.PodMeta.Labels }}{{ range $.PodMeta.Labels }}{{ $x := printf "%99v%99v" $.PodMeta.Labels (index $.PodMeta.Annotations "big") }}{{ end }}{{ end }}`
	var b strings.Builder
	b.WriteString("spiffe://example.org/x")
	for b.Len()+len(body) <= size {
		b.WriteString(body)
	}
	return b.String()
}

// TestFamilyTemplateAtTheSizeCap renders templates at and around the size cap that do the most
// work they can.
func TestFamilyTemplateAtTheSizeCap(t *testing.T) {
	var cases []familyCase
	for _, size := range []int{1 << 10, 8 << 10, maxTemplateBytes} {
		cases = append(cases, idOnly(fmt.Sprintf("%d bytes", size), maxWorkTemplate(size)))
	}
	runFamily(t, "template at the size cap", familyPod(), cases)
}

// TestFamilyObjects renders objects full of templates: thousands of small ones, and many
// near the size cap.
func TestFamilyObjects(t *testing.T) {
	var cases []familyCase
	for _, n := range []int{100, 1000, 10000} {
		small := make([]string, n)
		for i := range small {
			small[i] = "k8s:x:{{ .PodMeta.Name }}{{ range .PodMeta.Labels }}{{ end }}"
		}
		cases = append(cases, familyCase{name: fmt.Sprintf("%d small templates", n),
			spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: nsSATemplate, WorkloadSelectorTemplates: small}})
	}
	near := make([]string, 64)
	for i := range near {
		near[i] = "k8s:x:" + maxWorkTemplate(maxTemplateBytes - 16)[len("spiffe://example.org/x"):]
	}
	cases = append(cases, familyCase{name: "64 templates near the size cap",
		spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: nsSATemplate, WorkloadSelectorTemplates: near}})
	runFamily(t, "objects", familyPod(), cases)

	// Many objects at the caps of one object, compiled and kept together, each rendered for
	// a pod: the cap of all objects bounds what they keep.
	compiled := NewCompiledClusterSPIFFEIDs()
	r := newTestRenderer(t, config.DefaultParentIDTemplate)
	rise, took := newPeakTracker(t).measure(t, func() {
		for i := range 40 {
			_, _ = r.PodEntry(compiled.Get(bigObject(fmt.Sprint(i))), familyPod(), testNode(), nil)
		}
	})
	if rise > 4*familyPeakBound {
		t.Errorf("40 objects at the caps raised the peak memory %d MiB, more than %d MiB", rise>>20, 4*familyPeakBound>>20)
	}
	if _, err := r.PodEntry(testClusterSPIFFEID(spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: nsSATemplate}), testPod(), testNode(), nil); err != nil {
		t.Errorf("after 40 objects at the caps, an ordinary render fails: %v", err)
	}
	t.Logf("family objects at the caps: 40 objects, peak rise %d KiB, time %v", rise>>10, took)
}
