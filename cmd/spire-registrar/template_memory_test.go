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

package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// peakRSS is the process's peak resident set size (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}

// TestHostileTemplateOverManyPodsCostsNoMemory applies, with no admission webhook in the way,
// hostile ClusterSPIFFEIDs over 20 pods, next to a good ClusterSPIFFEID over the same pods: one
// whose template passes a pod's 200 KiB annotation a hundred times to printf, one that calls
// the methods of a pod's resource quantity (its big integer's SetBit), and one with thousands
// of templates, past the cap of one object. The binary's peak RSS must stay within a small
// constant of what it was, each hostile resource must report a render failure for every pod
// (the one past the cap instead says why in its Ready condition), the good one's entries must be
// untouched, and a pod created afterwards must get its entry.
func TestHostileTemplateOverManyPodsCostsNoMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real kube-apiserver and spire-server")
	}
	const pods, maxGrowth = 20, 64 << 20
	bin := realcluster.RegistrarBinary(t)
	stack := realcluster.NewStack(t)
	client, spireAPI, server := stack.Client, stack.SpireAPI, stack.SPIRE
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	node, err := realcluster.CreateNode(ctx, client, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("a", 200<<10)
	for i := range pods {
		if _, err := realcluster.CreatePod(ctx, client, "default", fmt.Sprintf("web-%d", i), node.Name, withBigAnnotationAndSizeLimit(big)); err != nil {
			t.Fatal(err)
		}
	}
	// The good template reads the annotation too, so that the pods are cached with it before
	// the baseline is taken.
	if _, err := spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, &spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: "good"},
		Spec: spirev1alpha1.ClusterSPIFFEIDSpec{
			SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/good/{{ .PodMeta.Name }}/{{ len .PodMeta.Annotations.big }}"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	config := writeFile(t, fmt.Sprintf(`apiVersion: spire.spiffe.io/v1alpha1
kind: ControllerManagerConfig
trustDomain: example.org
clusterName: it
spireServerSocketPath: %s
`, server.SocketPath()))
	r := startReplica(t, bin, stack.Kube.Kubeconfig(), config)
	poll := func(what string, cond func() (bool, error)) {
		t.Helper()
		var last error
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			ok, err := cond()
			last = err
			return ok, nil
		}); err != nil {
			t.Fatalf("timed out waiting for %s (last: %v)", what, last)
		}
	}
	goodEntries := func() (int, error) {
		es, err := server.EntryShow(ctx)
		n := 0
		for _, e := range es {
			if strings.Contains(e.SPIFFEID, "/good/") {
				n++
			}
		}
		return n, err
	}
	poll("the good ClusterSPIFFEID's entries", func() (bool, error) { n, err := goodEntries(); return n == pods, err })
	before := peakRSS(t, r.cmd.Process.Pid)

	args := strings.Repeat(" $s", 100)
	tiny := make([]string, 5000)
	for i := range tiny {
		tiny[i] = "k8s:x:{{ .PodMeta.Name }}"
	}
	for name, spec := range map[string]spirev1alpha1.ClusterSPIFFEIDSpec{
		"printf": {SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/x/{{ $s := .PodMeta.Annotations.big }}{{ printf \"" + strings.Repeat("%s", 100) + "\"" + args + " }}"},
		"quantity-methods": {SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/x/{{ $b := (index .PodSpec.Volumes 0).EmptyDir.SizeLimit.AsDec.UnscaledBig }}" +
			"{{ $x := $b.SetBit $b 100000000 1 }}{{ $y := $b.Lsh $b 100000000 }}"},
		"too-many-templates": {SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/x/{{ .PodMeta.Name }}", WorkloadSelectorTemplates: tiny},
	} {
		if _, err := spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, &spirev1alpha1.ClusterSPIFFEID{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll("ClusterSPIFFEID "+name+" to report that it renders no entry", func() (bool, error) {
			c, err := spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if name == "too-many-templates" {
				// Past a cap it compiles nothing, and says so instead of counting pods.
				ready := apimeta.FindStatusCondition(c.Status.Conditions, "Ready")
				return ready != nil && strings.Contains(ready.Message, "more than the 128"), fmt.Errorf("Ready condition %+v", ready)
			}
			s := c.Status.Stats
			return s.PodsSelected == pods && s.PodEntryRenderFailures == pods, fmt.Errorf("stats %+v", s)
		})
	}
	began := time.Now()
	if _, err := realcluster.CreatePod(ctx, client, "default", "late", node.Name, withBigAnnotationAndSizeLimit(big)); err != nil {
		t.Fatal(err)
	}
	poll("the good entry of a pod created after the hostile ClusterSPIFFEIDs", func() (bool, error) {
		n, err := goodEntries()
		return n == pods+1, err
	})
	t.Logf("a pod created after the hostile ClusterSPIFFEIDs got its entry in %v", time.Since(began))
	after := peakRSS(t, r.cmd.Process.Pid)
	t.Logf("peak RSS %d MiB before the hostile ClusterSPIFFEID, %d MiB after it rendered for %d pods", before>>20, after>>20, pods)
	if after-before > maxGrowth {
		t.Errorf("peak RSS grew by %d MiB, want at most %d MiB", (after-before)>>20, maxGrowth>>20)
	}
	if n, err := goodEntries(); err != nil || n != pods+1 {
		t.Errorf("the good ClusterSPIFFEID has %d entries (err %v), want %d", n, err, pods+1)
	}
	es, err := server.EntryShow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if strings.Contains(e.SPIFFEID, "/x/") {
			t.Errorf("SPIRE holds an entry of the hostile template: %s", e.SPIFFEID)
		}
	}
}

// withBigAnnotationAndSizeLimit gives a pod an annotation of the given text and an emptyDir
// volume with a size limit: a resource quantity, whose methods the old template data offered.
func withBigAnnotationAndSizeLimit(big string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Annotations = map[string]string{"big": big}
		limit := resource.MustParse("1Gi")
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "scratch",
			VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}}})
	}
}
