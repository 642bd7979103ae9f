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

package monitoring_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/spire-registrar/spire-registrar/pkg/metrics"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// monitoringFile is the path of a file of manifests/monitoring.
func monitoringFile(t *testing.T, name string) string {
	t.Helper()
	root, err := realcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "manifests", "monitoring", name)
}

func readYAML(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := yaml.Unmarshal(data, &out); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return out
}

// ruleGroups returns the PrometheusRule's spec.groups as a Prometheus rules file.
func ruleGroups(t *testing.T) map[string]any {
	t.Helper()
	rule := readYAML(t, monitoringFile(t, "prometheusrule.yaml"))
	if rule["kind"] != "PrometheusRule" || rule["apiVersion"] != "monitoring.coreos.com/v1" {
		t.Fatalf("prometheusrule.yaml is a %v of %v", rule["kind"], rule["apiVersion"])
	}
	spec, _ := rule["spec"].(map[string]any)
	if spec["groups"] == nil {
		t.Fatal("prometheusrule.yaml has no spec.groups")
	}
	return map[string]any{"groups": spec["groups"]}
}

// writeRulesFile writes the PrometheusRule's groups to dir/rules.yaml and returns its path.
func writeRulesFile(t *testing.T, dir string) string {
	t.Helper()
	data, err := yaml.Marshal(ruleGroups(t))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// rules lists the alerting rules of the groups: name → expression.
func rules(t *testing.T, groups map[string]any) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, g := range groups["groups"].([]any) {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			rule := r.(map[string]any)
			out[rule["alert"].(string)] = rule["expr"].(string)
		}
	}
	return out
}

// tool finds a binary of Debian's prometheus package. Without it the test is skipped under
// -short and fails otherwise.
func tool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if testing.Short() {
		t.Skipf("%s not found (hack/install-deps.sh installs it); skipped with -short", name)
	}
	t.Fatalf("%s not found: run hack/install-deps.sh, which installs Debian's prometheus package", name)
	return ""
}

// TestPlainRulesFileIsThePrometheusRule: prometheus-rules.yaml, for a Prometheus without the
// operator, holds exactly the PrometheusRule's groups.
func TestPlainRulesFileIsThePrometheusRule(t *testing.T) {
	plain := readYAML(t, monitoringFile(t, "prometheus-rules.yaml"))
	if diff := cmp.Diff(ruleGroups(t), plain); diff != "" {
		t.Errorf("prometheus-rules.yaml differs from prometheusrule.yaml's spec.groups (-PrometheusRule +file):\n%s", diff)
	}
}

// TestPromtool checks the PrometheusRule's groups with `promtool check rules` and runs the
// unit tests of testdata/alerts_test.yaml on them with `promtool test rules`.
func TestPromtool(t *testing.T) {
	promtool := tool(t, "promtool")
	dir := t.TempDir()
	rulesFile := writeRulesFile(t, dir)
	unitTests, err := os.ReadFile(filepath.Join("testdata", "alerts_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts_test.yaml"), unitTests, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"check", "rules", rulesFile}, {"test", "rules", "alerts_test.yaml"}} {
		cmd := exec.CommandContext(t.Context(), promtool, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	// Every alert has a unit test that expects it to fire.
	for name := range rules(t, ruleGroups(t)) {
		if !regexp.MustCompile(`alertname: ` + name + `\s+exp_alerts:\s+- `).Match(unitTests) {
			t.Errorf("testdata/alerts_test.yaml never expects %s to fire", name)
		}
	}
}

// dashboardExprs returns the PromQL of every panel of the dashboard, by panel title.
func dashboardExprs(t *testing.T) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(monitoringFile(t, "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dashboard struct {
		UID    string `json:"uid"`
		Panels []struct {
			ID      int    `json:"id"`
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dashboard); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	if dashboard.UID == "" {
		t.Error("the dashboard has no uid")
	}
	out := map[string][]string{}
	ids := map[int]bool{}
	for _, p := range dashboard.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, target := range p.Targets {
			out[p.Title] = append(out[p.Title], target.Expr)
		}
	}
	return out
}

// servedMetrics returns the names of every metric spire-registrar registers, with the
// series names of histograms.
func servedMetrics() map[string]bool {
	descs := make(chan *prometheus.Desc)
	go func() {
		metrics.Registry.Describe(descs)
		close(descs)
	}()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	names := map[string]bool{}
	for d := range descs {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
				names[m[1]+suffix] = true
			}
		}
	}
	return names
}

// queueNames are the values of the workqueue metrics' name label that queries select by.
var queueNames = map[string]bool{"spire_registrar_pods": true, "spire_registrar_podcertificaterequests": true}

// TestQueriesNameServedMetrics: every spire_registrar_ metric the dashboard and the alerts
// query is one spire-registrar serves, so a renamed metric cannot leave them blank.
func TestQueriesNameServedMetrics(t *testing.T) {
	served := servedMetrics()
	if !served["spire_registrar_pod_entry_latency_seconds_bucket"] {
		t.Fatal("the registry does not describe the latency histogram")
	}
	queries := map[string][]string{}
	for title, exprs := range dashboardExprs(t) {
		queries["dashboard panel "+title] = exprs
	}
	for name, expr := range rules(t, ruleGroups(t)) {
		queries["alert "+name] = []string{expr}
	}
	metricName := regexp.MustCompile(`\bspire_registrar_[a-z_]+`)
	for where, exprs := range queries {
		for _, expr := range exprs {
			for _, name := range metricName.FindAllString(expr, -1) {
				if !served[name] && !queueNames[name] {
					t.Errorf("%s queries %s, which spire-registrar does not serve", where, name)
				}
			}
		}
	}
}

// TestKustomizeMonitoring: `kubectl apply -k manifests/monitoring` creates the PrometheusRule,
// the PodMonitor and the dashboard's ConfigMap, labelled for Grafana's sidecar, in
// spire-server.
func TestKustomizeMonitoring(t *testing.T) {
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), monitoringFile(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	out, err := resources.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var dashboard *unstructured.Unstructured
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		o := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &o.Object); err != nil {
			t.Fatal(err)
		}
		got = append(got, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
		if o.GetKind() == "ConfigMap" {
			dashboard = o
		}
	}
	slices.Sort(got)
	want := []string{"ConfigMap spire-server/spire-registrar-dashboard", "PodMonitor spire-server/spire-registrar", "PrometheusRule spire-server/spire-registrar"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("objects (-want +got):\n%s", diff)
	}
	if dashboard.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("the dashboard's ConfigMap is not labelled for Grafana's sidecar: %v", dashboard.GetLabels())
	}
	file, err := os.ReadFile(monitoringFile(t, "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	data, _, _ := unstructured.NestedStringMap(dashboard.Object, "data")
	if data["grafana-dashboard.json"] != string(file) {
		t.Errorf("the ConfigMap does not hold grafana-dashboard.json as it is")
	}
}
