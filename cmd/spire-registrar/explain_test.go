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
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/explain"
	"github.com/spire-registrar/spire-registrar/pkg/render"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// TestExplainAgainstRealCluster runs the binary as the controller on a real kube-apiserver and
// spire-server, breaks things in each way explain knows, and runs the binary again as the
// kubectl plugin (through kubectl when it is on PATH) to explain each pod: every reason and
// SPIRE state must be the one set up. With -v the text outputs are logged (docs/explain.md's
// examples come from them).
func TestExplainAgainstRealCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real kube-apiserver and spire-server")
	}
	bin := realcluster.RegistrarBinary(t)
	stack := realcluster.NewStack(t)
	client, spireAPI := stack.Client, stack.SpireAPI
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for ns, labels := range map[string]map[string]string{"shop": {"team": "shop"}, "ignored": nil} {
		must(client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}, metav1.CreateOptions{}))
	}
	must(realcluster.CreateNode(ctx, client, "node-1"))
	pod := func(ns, name, node string, labels map[string]string) {
		t.Helper()
		must(realcluster.CreatePod(ctx, client, ns, name, node, func(p *corev1.Pod) { p.Labels, p.Spec.ServiceAccountName = labels, name }))
	}
	web := map[string]string{"app": "web"}
	pod("shop", "web", "node-1", web)
	pod("shop", "api", "node-1", web)
	pod("shop", "gone", "node-1", web)
	pod("shop", "pending", "", web)
	pod("shop", "orphan", "node-gone", web)
	pod("shop", "done", "node-1", web)
	must(realcluster.SetPodPhase(ctx, client, "shop", "done", corev1.PodSucceeded))
	pod("shop", "broken", "node-1", map[string]string{"app": "broken"})
	pod("ignored", "web", "node-1", web)

	clusterSPIFFEID := func(name string, spec spirev1alpha1.ClusterSPIFFEIDSpec) {
		t.Helper()
		if spec.ClassName == "" {
			spec.ClassName = "demo"
		}
		if spec.SPIFFEIDTemplate == "" {
			spec.SPIFFEIDTemplate = "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/sa/{{ .PodSpec.ServiceAccountName }}"
		}
		must(spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, &spirev1alpha1.ClusterSPIFFEID{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{}))
	}
	selector := func(labels map[string]string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: labels}
	}
	clusterSPIFFEID("web-identity", spirev1alpha1.ClusterSPIFFEIDSpec{PodSelector: selector(web), DNSNameTemplates: []string{"{{ .PodMeta.Name }}.shop"}})
	clusterSPIFFEID("default-fallback", spirev1alpha1.ClusterSPIFFEIDSpec{Fallback: true,
		SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/default"})
	clusterSPIFFEID("other-class", spirev1alpha1.ClusterSPIFFEIDSpec{ClassName: "other"})
	clusterSPIFFEID("team-billing", spirev1alpha1.ClusterSPIFFEIDSpec{NamespaceSelector: selector(map[string]string{"team": "billing"})})
	clusterSPIFFEID("databases", spirev1alpha1.ClusterSPIFFEIDSpec{PodSelector: selector(map[string]string{"app": "db"})})
	clusterSPIFFEID("broken-template", spirev1alpha1.ClusterSPIFFEIDSpec{PodSelector: selector(map[string]string{"app": "broken"}),
		SPIFFEIDTemplate: `spiffe://{{ .TrustDomain }}/team/{{ index .PodMeta.Labels "team" }}`})
	// Creation times have a resolution of a second: the duplicate must be younger.
	time.Sleep(1100 * time.Millisecond)
	clusterSPIFFEID("web-duplicate", spirev1alpha1.ClusterSPIFFEIDSpec{PodSelector: selector(web), DNSNameTemplates: []string{"{{ .PodMeta.Name }}.shop"}})

	config := writeFile(t, `trustDomain: example.org
clusterName: demo
clusterDomain: cluster.local
className: demo
ignoreNamespaces: [kube-system, ignored]
gcInterval: 1h
spireServerSocketPath: `+stack.SPIRE.SocketPath()+"\n")
	var logs realcluster.SyncBuffer
	controller := exec.Command(bin, "--kubeconfig", stack.Kube.Kubeconfig(), "--config", config)
	controller.Stdout, controller.Stderr = &logs, &logs
	if err := controller.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = controller.Process.Kill()
		_ = controller.Wait()
		if t.Failed() {
			t.Logf("controller output:\n%s", logs.String())
		}
	}()

	spireClient, err := spire.Dial(ctx, stack.SPIRE.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer spireClient.Close()
	bySPIFFEID := map[string]*spiretypes.Entry{}
	want := []string{"spiffe://example.org/ns/shop/default", "spiffe://example.org/ns/shop/sa/api",
		"spiffe://example.org/ns/shop/sa/gone", "spiffe://example.org/ns/shop/sa/web"}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		entries, err := spireClient.ListEntries(ctx)
		if err != nil {
			return false, nil
		}
		clear(bySPIFFEID)
		for _, e := range entries {
			bySPIFFEID[render.SPIFFEIDString(e.GetSpiffeId())] = e
		}
		return slices.Equal(want, slices.Sorted(maps.Keys(bySPIFFEID))), nil
	}); err != nil {
		t.Fatalf("SPIRE holds %v, want %v", slices.Sorted(maps.Keys(bySPIFFEID)), want)
	}
	// Behind the controller's back (it lists SPIRE only hourly): api's entry is changed and
	// gone's deleted.
	tampered := bySPIFFEID["spiffe://example.org/ns/shop/sa/api"]
	tampered.X509SvidTtl, tampered.DnsNames = 60, []string{"tampered.example"}
	if res, err := spireClient.UpdateEntries(ctx, []*spiretypes.Entry{tampered}, &spiretypes.EntryMask{X509SvidTtl: true, DnsNames: true}); err != nil || res[0].Err != nil {
		t.Fatalf("tampering with the api entry: %v %v", err, res)
	}
	gone := bySPIFFEID["spiffe://example.org/ns/shop/sa/gone"]
	if res, err := spireClient.DeleteEntries(ctx, []string{gone.GetId()}); err != nil || res[0].Err != nil {
		t.Fatalf("deleting the gone entry: %v %v", err, res)
	}
	// An entry of the gone pod that nothing declares, as an older template left it.
	stale := &spiretypes.Entry{SpiffeId: &spiretypes.SPIFFEID{TrustDomain: "example.org", Path: "/ns/shop/old-gone"},
		ParentId: gone.GetParentId(), Selectors: gone.GetSelectors()}
	if res, err := spireClient.CreateEntries(ctx, []*spiretypes.Entry{stale}); err != nil || res[0].Err != nil {
		t.Fatalf("creating a stale entry: %v %v", err, res)
	}
	// The status the controller writes for web-identity: web, api and gone set, pending and
	// orphan render failures, done counted as selected.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		c, err := spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Get(ctx, "web-identity", metav1.GetOptions{})
		return err == nil && c.Status.Stats.PodsSelected == 6 && c.Status.Stats.EntriesToSet == 3, nil
	}); err != nil {
		t.Fatal("web-identity's status never counted its pods")
	}

	// kubectl runs plugins found on PATH as kubectl-<name>; the binary answers to that name.
	pluginDir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(pluginDir, pluginName)); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		var cmd *exec.Cmd
		if kubectl, err := exec.LookPath("kubectl"); err == nil {
			cmd = exec.CommandContext(ctx, kubectl, append([]string{"spire-registrar", "explain"}, args...)...)
		} else {
			cmd = exec.CommandContext(ctx, filepath.Join(pluginDir, pluginName), append([]string{"explain"}, args...)...)
		}
		// No --kubeconfig: the plugin finds the cluster as kubectl does.
		cmd.Env = append(os.Environ(), "PATH="+pluginDir+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+stack.Kube.Kubeconfig())
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v: %v\n%s%s", cmd.Args, err, stdout.String(), stderr.String())
		}
		return stdout.String()
	}
	explainPod := func(target string) *explain.Pod {
		t.Helper()
		var p explain.Pod
		if err := json.Unmarshal([]byte(run("pod", target, "--config", config, "-o", "json")), &p); err != nil {
			t.Fatal(err)
		}
		t.Logf("$ kubectl spire-registrar explain pod %s --config config.yaml\n%s", target, run("pod", target, "--config", config))
		return &p
	}
	reasons := func(p *explain.Pod) map[string]string {
		out := map[string]string{}
		for _, v := range p.ClusterSPIFFEIDs {
			out[v.Name] = v.Reason
		}
		return out
	}
	states := func(p *explain.Pod) []string {
		var out []string
		for _, e := range p.Entries {
			out = append(out, e.ClusterSPIFFEID+":"+e.State)
		}
		return out
	}
	notForWeb := map[string]string{
		"other-class": explain.ReasonClassMismatch, "team-billing": explain.ReasonNamespaceSelectorMismatch,
		"databases": explain.ReasonPodSelectorMismatch, "broken-template": explain.ReasonPodSelectorMismatch,
	}
	with := func(m map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	cases := []struct {
		pod        string
		reasons    map[string]string
		states     []string
		ineligible string
	}{
		{pod: "shop/web", reasons: with(notForWeb, "web-identity", explain.ReasonRendered, "web-duplicate", explain.ReasonMasked,
			"default-fallback", explain.ReasonFallbackSuppressed), states: []string{"web-identity:InSync", "web-duplicate:Masked"}},
		{pod: "shop/api", reasons: with(notForWeb, "web-identity", explain.ReasonRendered, "web-duplicate", explain.ReasonMasked,
			"default-fallback", explain.ReasonFallbackSuppressed), states: []string{"web-identity:Outdated", "web-duplicate:Masked"}},
		{pod: "shop/gone", reasons: with(notForWeb, "web-identity", explain.ReasonRendered, "web-duplicate", explain.ReasonMasked,
			"default-fallback", explain.ReasonFallbackSuppressed), states: []string{"web-identity:Missing", "web-duplicate:Masked"}},
		{pod: "shop/pending", reasons: with(notForWeb, "web-identity", explain.ReasonPodNotScheduled, "web-duplicate", explain.ReasonPodNotScheduled,
			"default-fallback", explain.ReasonPodNotScheduled)},
		{pod: "shop/orphan", reasons: with(notForWeb, "web-identity", explain.ReasonNodeNotFound, "web-duplicate", explain.ReasonNodeNotFound,
			"default-fallback", explain.ReasonNodeNotFound)},
		{pod: "shop/done", reasons: with(notForWeb, "web-identity", explain.ReasonPodFinished, "web-duplicate", explain.ReasonPodFinished,
			"default-fallback", explain.ReasonPodFinished), ineligible: explain.ReasonPodFinished},
		{pod: "shop/broken", reasons: with(notForWeb, "web-identity", explain.ReasonPodSelectorMismatch, "web-duplicate", explain.ReasonPodSelectorMismatch,
			"broken-template", explain.ReasonRenderFailed, "default-fallback", explain.ReasonRendered), states: []string{"default-fallback:InSync"}},
		{pod: "ignored/web", reasons: map[string]string{"other-class": explain.ReasonClassMismatch, "team-billing": explain.ReasonNamespaceSelectorMismatch,
			"databases": explain.ReasonPodSelectorMismatch, "broken-template": explain.ReasonPodSelectorMismatch,
			"web-identity": explain.ReasonNamespaceIgnored, "web-duplicate": explain.ReasonNamespaceIgnored, "default-fallback": explain.ReasonNamespaceIgnored},
			ineligible: explain.ReasonNamespaceIgnored},
	}
	for _, tc := range cases {
		p := explainPod(tc.pod)
		if diff := cmp.Diff(tc.reasons, reasons(p)); diff != "" {
			t.Errorf("%s: reasons (-want +got):\n%s", tc.pod, diff)
		}
		if diff := cmp.Diff(tc.states, states(p)); diff != "" {
			t.Errorf("%s: entry states (-want +got):\n%s", tc.pod, diff)
		}
		if p.Reason != tc.ineligible {
			t.Errorf("%s: pod reason %q, want %q", tc.pod, p.Reason, tc.ineligible)
		}
		if tc.pod == "shop/gone" && (len(p.StaleSPIREEntries) != 1 || p.StaleSPIREEntries[0].SPIFFEID != "spiffe://example.org/ns/shop/old-gone") {
			t.Errorf("shop/gone: stale entries %+v, want the old-gone entry", p.StaleSPIREEntries)
		}
		if tc.pod == "shop/api" {
			wantDiff := []explain.FieldDiff{{Field: "x509SvidTtl", SPIRE: "60", Rendered: "0"}, {Field: "dnsNames", SPIRE: "[tampered.example]", Rendered: "[api.shop]"}}
			if diff := cmp.Diff(wantDiff, p.Entries[0].Diff); diff != "" {
				t.Errorf("shop/api: outdated fields (-want +got):\n%s", diff)
			}
		}
	}

	var c explain.ClusterSPIFFEID
	if err := json.Unmarshal([]byte(run("clusterspiffeid", "web-identity", "--config", config, "-o", "json")), &c); err != nil {
		t.Fatal(err)
	}
	t.Logf("$ kubectl spire-registrar explain clusterspiffeid web-identity --config config.yaml\n%s", run("clusterspiffeid", "web-identity", "--config", config))
	// The cluster's namespaces: default, kube-node-lease, kube-public, kube-system (ignored), shop
	// and ignored.
	wantCounts := explain.Counts{NamespacesSelected: 6, NamespacesIgnored: 2, PodsSelected: 6, Rendered: 3, InSync: 1, Outdated: 1, Missing: 1,
		RenderFailed: 2, NotScheduled: 1, Finished: 1}
	if diff := cmp.Diff(wantCounts, c.Observed); diff != "" {
		t.Errorf("web-identity counts (-want +got):\n%s", diff)
	}
	// What explain counts as status.stats counts agrees with what the controller wrote.
	statusCounts := []int{c.Status.NamespacesSelected, c.Status.NamespacesIgnored, c.Status.PodsSelected, c.Status.PodEntryRenderFailures, c.Status.EntriesToSet}
	if diff := cmp.Diff([]int{6, 2, 6, 2, 3}, statusCounts); diff != "" {
		t.Errorf("web-identity status.stats as explain reads them (-want +got):\n%s", diff)
	}
	var failures []string
	for _, f := range c.Failures {
		failures = append(failures, f.Pod+" "+f.Reason)
	}
	if diff := cmp.Diff([]string{"shop/api Outdated", "shop/gone Missing", "shop/orphan NodeNotFound", "shop/pending PodNotScheduled"}, failures); diff != "" {
		t.Errorf("web-identity failures (-want +got):\n%s", diff)
	}

	// Without kubectl, as "spire-registrar explain", the answer is the same.
	direct := exec.CommandContext(ctx, bin, "explain", "pod", "shop/web", "--config", config, "--kubeconfig", stack.Kube.Kubeconfig())
	out, err := direct.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Summary: 1 entry in SPIRE as rendered.") {
		t.Errorf("spire-registrar explain pod shop/web: %v\n%s", err, out)
	}
}

// TestExplainArgs checks when the binary is the explain command: as "spire-registrar explain"
// and under the kubectl plugin's name, where explain is the only command.
func TestExplainArgs(t *testing.T) {
	cases := []struct {
		argv         []string
		args         []string
		plugin, isOK bool
	}{
		{argv: []string{"spire-registrar", "--config", "c.yaml"}},
		{argv: []string{"/usr/bin/spire-registrar", "explain", "pod", "a/b"}, args: []string{"pod", "a/b"}, isOK: true},
		{argv: []string{"/home/u/bin/kubectl-spire_registrar", "explain", "pod", "a/b"}, args: []string{"pod", "a/b"}, plugin: true, isOK: true},
		{argv: []string{"kubectl-spire_registrar", "--config", "c.yaml"}, plugin: true, isOK: true},
		{argv: []string{"kubectl-spire_registrar"}, plugin: true, isOK: true},
	}
	for _, tc := range cases {
		args, plugin, ok := explainArgs(tc.argv)
		if !slices.Equal(args, tc.args) || plugin != tc.plugin || ok != tc.isOK {
			t.Errorf("explainArgs(%q) = %q, %v, %v; want %q, %v, %v", tc.argv, args, plugin, ok, tc.args, tc.plugin, tc.isOK)
		}
	}
}

// TestExplainUsageErrors checks that explain refuses what it cannot answer before reading
// anything, with exit code 2 for usage and 1 for a missing config.
func TestExplainUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		code int
		want string
	}{
		{args: []string{"deployment", "a/b"}, code: 2, want: `got "deployment a/b"`},
		{args: []string{"pod"}, code: 2, want: "want"},
		{args: []string{"pod", "a/b"}, code: 1, want: "--config is required"},
		{args: []string{"pod", "a/b", "-o", "yaml", "--config", "x"}, code: 1, want: "-o must be text or json"},
		{args: []string{"pod", "--bogus"}, code: 2, want: "flag provided but not defined"},
	}
	for _, tc := range cases {
		var stdout, stderr bytes.Buffer
		code := runExplain(context.Background(), tc.args, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("explain %q: exit %d, stderr %q; want exit %d mentioning %q", tc.args, code, stderr.String(), tc.code, tc.want)
		}
	}
}

// TestExplainWarnsOfIgnoredConfigFields: a config file with unknown or duplicated fields is
// loaded, not refused, and each such field is named on stderr.
func TestExplainWarnsOfIgnoredConfigFields(t *testing.T) {
	cfg, err := config.Parse([]byte("trustDomain: example.org\nclusterName: a\nclusterName: b\ntrustdomain: x\nfoo: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	warnConfigFields(&stderr, cfg)
	for _, want := range []string{
		"warning: ignoring unknown config field trustdomain (did you mean trustDomain?)\n",
		"warning: ignoring unknown config field foo\n",
		"warning: config field clusterName is set more than once; the last value is used\n",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr does not hold %q:\n%s", want, stderr.String())
		}
	}
}
