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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/app"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/metrics"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

const (
	// scrapeJob is the job Prometheus scrapes the controllers as.
	scrapeJob = "spire-registrar"
	// latencyQuery is the dashboard's and the alert's p99 of the pod → entry latency.
	latencyQuery = `histogram_quantile(0.99, sum by (le) (rate(spire_registrar_pod_entry_latency_seconds_bucket[1m])))`
	pods         = 5
)

// TestPrometheusScrapesTheController runs the controllers in this process, as the binary
// runs them, against a real kube-apiserver and spire-server, and a real Prometheus that
// scrapes them every second with the shipped rules loaded. Once pods got their entries it
// asks Prometheus' HTTP API what a user's Prometheus would answer: the target is up, the p99
// pod → entry latency is a finite number, every rule is loaded and evaluates without error
// and, the controller being healthy, no alert is pending or firing; every query of the
// dashboard evaluates.
func TestPrometheusScrapesTheController(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real etcd, kube-apiserver, spire-server and prometheus; skipped with -short")
	}
	prometheusBin := tool(t, "prometheus")
	// As the binary does, before any queue is made: the queue-wait phase comes from them.
	metrics.SetWorkqueueProvider()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	stack := realcluster.NewStack(t)
	metricsAddr, err := app.Serve(ctx, "metrics", "127.0.0.1:0", app.MetricsHandler())
	if err != nil {
		t.Fatal(err)
	}
	prom := startPrometheus(t, prometheusBin, metricsAddr.String())
	runControllers(ctx, t, stack)
	// The histogram's zero counts are scraped before any pod: rate() then has a baseline.
	prom.eventually(t, "the controller's target is up", fmt.Sprintf(`up{job=%q} == 1 and on () spire_registrar_controller_synced{controller="spire-registrar-entry-controller"} == 1`, scrapeJob),
		func(v float64) bool { return v == 1 })

	created := createPodsAndClusterSPIFFEID(ctx, t, stack)
	waitForEntries(ctx, t, stack.SPIRE.SocketPath(), created)

	p99 := prom.eventually(t, "the p99 pod → entry latency", latencyQuery, func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) })
	// Kubernetes timestamps are whole seconds: a latency under a second may read up to 1s.
	if p99 <= 0 || p99 > 10 {
		t.Errorf("p99 pod → entry latency = %.3fs, want a few hundred milliseconds up to about a second", p99)
	}
	t.Logf("p99 pod → entry latency, as Prometheus computes it: %.3fs", p99)
	if n := prom.eventually(t, "pods observed", `sum(spire_registrar_pod_entry_latency_seconds_count)`, func(v float64) bool { return v >= pods }); n != pods {
		t.Errorf("latency observations = %v, want one per pod (%d)", n, pods)
	}

	checkRules(t, prom)
	checkDashboardQueries(t, prom)
}

// runControllers runs spire-registrar's controllers until ctx ends, and waits until they are
// ready.
func runControllers(ctx context.Context, t *testing.T, stack *realcluster.Stack) {
	t.Helper()
	cfg, err := config.Parse(fmt.Appendf(nil, `
apiVersion: spire.spiffe.io/v1alpha1
kind: ControllerManagerConfig
trustDomain: %s
clusterName: monitoring
spireServerSocketPath: %s
`, stack.SPIRE.TrustDomain(), stack.SPIRE.SocketPath()))
	if err != nil {
		t.Fatal(err)
	}
	client, err := spire.Dial(ctx, cfg.SPIREServerSocketPath)
	if err != nil {
		t.Fatal(err)
	}
	health := &app.Health{}
	kubeInformers, spireInformers := app.NewInformerFactories(stack.Client, stack.SpireAPI)
	runErr := make(chan error, 1)
	go func() {
		runErr <- app.Run(ctx, app.ControllerContext{Config: cfg, KubeClient: stack.Client, SpireAPIClient: stack.SpireAPI,
			KubeInformers: kubeInformers, SpireInformers: spireInformers, SPIRE: client}, 2, health)
	}()
	t.Cleanup(func() {
		if err := <-runErr; err != nil {
			t.Errorf("app.Run: %v", err)
		}
		_ = client.Close()
	})
	deadline := time.Now().Add(60 * time.Second)
	for health.Ready() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("controllers not ready: %v", health.Ready())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// createPodsAndClusterSPIFFEID creates a node, a ClusterSPIFFEID for the pods of a namespace
// and the pods, bound to the node; it returns the pods' UIDs.
func createPodsAndClusterSPIFFEID(ctx context.Context, t *testing.T, stack *realcluster.Stack) []string {
	t.Helper()
	const ns = "workloads"
	if err := realcluster.EnsureNamespace(ctx, stack.Client, ns); err != nil {
		t.Fatal(err)
	}
	if _, err := realcluster.CreateNode(ctx, stack.Client, "node-1"); err != nil {
		t.Fatal(err)
	}
	_, err := stack.SpireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, &spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: "workloads"},
		Spec: spirev1alpha1.ClusterSPIFFEIDSpec{
			SPIFFEIDTemplate:  "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/pod/{{ .PodMeta.Name }}",
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var uids []string
	for i := range pods {
		pod, err := realcluster.CreatePod(ctx, stack.Client, ns, "pod-"+strconv.Itoa(i), "node-1")
		if err != nil {
			t.Fatal(err)
		}
		uids = append(uids, string(pod.UID))
	}
	return uids
}

// waitForEntries waits until SPIRE holds an entry for each pod UID.
func waitForEntries(ctx context.Context, t *testing.T, socketPath string, uids []string) {
	t.Helper()
	client, err := spire.Dial(ctx, socketPath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Close() }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		entries, err := client.ListEntries(ctx)
		if err != nil {
			t.Fatal(err)
		}
		have := map[string]bool{}
		for _, e := range entries {
			for _, s := range e.GetSelectors() {
				if uid, ok := strings.CutPrefix(s.GetValue(), "pod-uid:"); ok {
					have[uid] = true
				}
			}
		}
		missing := 0
		for _, uid := range uids {
			if !have[uid] {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d pods have no entry in SPIRE", missing, len(uids))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkRules: Prometheus loaded every rule of the PrometheusRule, each has been evaluated
// without error, and none is pending or firing against a healthy controller.
func checkRules(t *testing.T, prom *prometheusServer) {
	t.Helper()
	want := rules(t, ruleGroups(t))
	deadline := time.Now().Add(30 * time.Second)
	for {
		var resp struct {
			Groups []struct {
				Rules []struct {
					Name           string    `json:"name"`
					Health         string    `json:"health"`
					LastError      string    `json:"lastError"`
					State          string    `json:"state"`
					LastEvaluation time.Time `json:"lastEvaluation"`
				} `json:"rules"`
			} `json:"groups"`
		}
		prom.get(t, "/api/v1/rules", nil, &resp)
		var problems []string
		seen := 0
		for _, g := range resp.Groups {
			for _, r := range g.Rules {
				if _, ok := want[r.Name]; !ok {
					problems = append(problems, "unexpected rule "+r.Name)
					continue
				}
				seen++
				switch {
				case r.LastEvaluation.IsZero() || r.Health == "unknown":
					problems = append(problems, r.Name+" not evaluated yet")
				case r.Health != "ok":
					problems = append(problems, fmt.Sprintf("%s: health %s: %s", r.Name, r.Health, r.LastError))
				case r.State != "inactive":
					problems = append(problems, fmt.Sprintf("%s is %s against a healthy controller", r.Name, r.State))
				}
			}
		}
		if seen != len(want) {
			problems = append(problems, fmt.Sprintf("%d of the %d rules loaded", seen, len(want)))
		}
		if len(problems) == 0 {
			t.Logf("Prometheus evaluates all %d rules, none pending or firing", seen)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("rules as Prometheus has them: %s", strings.Join(problems, "; "))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// checkDashboardQueries: every query of the dashboard evaluates, with its variables set as
// Grafana would, and every panel but those of failures shows data once the controller has
// written entries. rate() needs two scrapes of a series, and series such as the writes by
// result are born with the first write, so this waits for up to 30 seconds.
func checkDashboardQueries(t *testing.T, prom *prometheusServer) {
	t.Helper()
	vars := strings.NewReplacer("$__rate_interval", "1m", "$job", scrapeJob)
	// What has no data on a healthy controller: failures, and the pod certificate signer's
	// panels, since the signer is off here (TestQueriesNameServedMetrics checks their names).
	mayBeEmpty := map[string]bool{"SPIRE call errors": true, "Render failures": true,
		"Pod certificate requests ended": true, "Pod certificate requests waiting": true,
		"Pod certificate issue latency": true, "Signer CA": true}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var empty []string
		for title, exprs := range dashboardExprs(t) {
			for _, expr := range exprs {
				var resp struct {
					Result []json.RawMessage `json:"result"`
				}
				prom.get(t, "/api/v1/query", url.Values{"query": {vars.Replace(expr)}}, &resp)
				if len(resp.Result) == 0 && !mayBeEmpty[title] {
					empty = append(empty, fmt.Sprintf("%s: %s", title, expr))
				}
			}
		}
		if len(empty) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("dashboard queries without data after 30s:\n%s", strings.Join(empty, "\n"))
		}
		time.Sleep(time.Second)
	}
}

// prometheusServer is a prometheus process on loopback.
type prometheusServer struct {
	url string
	log string
}

// startPrometheus starts prometheus scraping target every second, with the PrometheusRule's
// groups loaded and evaluated every second. It is stopped when the test ends.
func startPrometheus(t *testing.T, bin, target string) *prometheusServer {
	t.Helper()
	dir := t.TempDir()
	rulesFile := writeRulesFile(t, dir)
	configFile := filepath.Join(dir, "prometheus.yml")
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - %s
scrape_configs:
  - job_name: %s
    static_configs:
      - targets: [%q]
`, rulesFile, scrapeJob, target)
	if err := os.WriteFile(configFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	// A free port may be taken between finding it and prometheus binding it: try again then.
	var lastErr error
	for attempt := range 3 {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		p := &prometheusServer{url: "http://127.0.0.1:" + strconv.Itoa(port), log: filepath.Join(dir, fmt.Sprintf("prometheus-%d.log", attempt))}
		if lastErr = p.start(t, bin, configFile, filepath.Join(dir, "data"), port); lastErr == nil {
			return p
		}
	}
	t.Fatalf("starting prometheus: %v", lastErr)
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (p *prometheusServer) start(t *testing.T, bin, configFile, dataDir string, port int) error {
	logFile, err := os.Create(p.log)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, "--config.file="+configFile, "--storage.tsdb.path="+dataDir,
		"--web.listen-address=127.0.0.1:"+strconv.Itoa(port), "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); logFile.Close() }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("prometheus exited: %v\n%s", err, p.logTail())
		default:
		}
		if resp, err := http.Get(p.url + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Cleanup(func() {
					stop()
					if t.Failed() {
						t.Logf("prometheus log:\n%s", p.logTail())
					}
				})
				return nil
			}
		}
		if time.Now().After(deadline) {
			stop()
			return fmt.Errorf("prometheus not ready after 30s\n%s", p.logTail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (p *prometheusServer) logTail() string {
	data, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(len(lines)-30, 0):], "\n")
}

// get calls Prometheus' HTTP API and decodes its data into out.
func (p *prometheusServer) get(t *testing.T, path string, query url.Values, out any) {
	t.Helper()
	u := p.url + path
	if query != nil {
		u += "?" + query.Encode()
	}
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	if body.Status != "success" {
		t.Fatalf("GET %s: %s: %s", u, body.Status, body.Error)
	}
	if err := json.Unmarshal(body.Data, out); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

// query evaluates an instant query that must yield one sample, and returns its value.
func (p *prometheusServer) query(t *testing.T, expr string) (float64, error) {
	t.Helper()
	var data struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Value [2]any `json:"value"`
		} `json:"result"`
	}
	p.get(t, "/api/v1/query", url.Values{"query": {expr}}, &data)
	if data.ResultType != "vector" || len(data.Result) != 1 {
		return 0, fmt.Errorf("%d samples of %s", len(data.Result), data.ResultType)
	}
	s, ok := data.Result[0].Value[1].(string)
	if !ok {
		return 0, errors.New("sample value is not a string")
	}
	return strconv.ParseFloat(s, 64)
}

// eventually evaluates expr until its one sample satisfies ok, for up to 30 seconds, and
// returns that sample.
func (p *prometheusServer) eventually(t *testing.T, what, expr string, ok func(float64) bool) float64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := p.query(t, expr)
		if err == nil && ok(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s = %v (%v) after 30s", what, expr, v, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
