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

package scale

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/app"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/controller/entry"
	"github.com/spire-registrar/spire-registrar/pkg/metrics"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

const (
	// pods and k make the smoke's N and K: pods×k entries.
	pods = 50
	k    = 2
	// namespace, class and node of the test's pods.
	namespace = "scale"
	className = "scale"
	nodeName  = "scale-node"
	// gcInterval is short so that the restart check covers periodic full resyncs too.
	gcInterval = time.Second
	workers    = 10
)

// SPIRE's telemetry counters of entry writes: one per entry written, whatever the batch.
var entryWriteMetrics = []string{
	"spire_server_datastore_registration_entry_create",
	"spire_server_datastore_registration_entry_update",
	"spire_server_datastore_registration_entry_delete",
}

// TestSmoke gives 50 pods K=2 entries each through two ClusterSPIFFEIDs that select every
// pod, checks SPIRE with its own CLI, then restarts the controller and checks that SPIRE
// counts no entry write and still holds the very same entries, revision numbers included.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kube-apiserver, PostgreSQL and spire-server; skipped with -short")
	}
	ctx := t.Context()
	postgres := realcluster.NewPostgres(t, realcluster.PostgresOptions{})
	stack := realcluster.NewStackWith(t, realcluster.StackOptions{SPIRE: realcluster.SPIREOptions{Postgres: postgres}})

	if err := realcluster.EnsureNamespace(ctx, stack.Client, namespace); err != nil {
		t.Fatal(err)
	}
	if _, err := realcluster.CreateNode(ctx, stack.Client, nodeName); err != nil {
		t.Fatal(err)
	}
	for j := range k {
		if _, err := stack.SpireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, &spirev1alpha1.ClusterSPIFFEID{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("every-pod-%d", j)},
			Spec: spirev1alpha1.ClusterSPIFFEIDSpec{
				ClassName:        className,
				SPIFFEIDTemplate: fmt.Sprintf("spiffe://{{ .TrustDomain }}/k%d/ns/{{ .PodMeta.Namespace }}/pod/{{ .PodMeta.Name }}", j),
				NamespaceSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{corev1.LabelMetadataName: namespace},
				},
			},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	stop := startController(t, stack)

	created := createPods(t, stack, pods)
	entries := waitEntries(t, stack.SPIRE, pods*k)
	checkKPerPod(t, created, entries, stack.SPIRE.TrustDomain())

	stop()
	before := entryRevisions(entries)
	writesBefore := scrapeEntryWrites(t, stack.SPIRE)
	// The counters are the right ones, or counting no write would prove nothing: they counted
	// the entries' creation.
	if writesBefore[0] < pods*k {
		t.Fatalf("SPIRE's telemetry counts %v entry creations, want at least the %d made", writesBefore[0], pods*k)
	}
	resyncs := func() float64 {
		var m dto.Metric
		if err := metrics.FullResyncs.WithLabelValues(entry.ControllerName, "success").Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue()
	}
	resyncsBefore := resyncs()
	startController(t, stack)
	// Ready means the first full resync is done; two periodic ones follow.
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return resyncs() >= resyncsBefore+3, nil
	})
	if err != nil {
		t.Fatalf("%v full resyncs after the restart, want 3: %v", resyncs()-resyncsBefore, err)
	}
	if got := scrapeEntryWrites(t, stack.SPIRE); !cmp.Equal(got, writesBefore) {
		t.Errorf("SPIRE counted entry writes during the restart (create, update, delete before → after): %v → %v", writesBefore, got)
	}
	after, err := stack.SPIRE.EntryShow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, entryRevisions(after)); diff != "" {
		t.Errorf("entries changed over the restart, ID → SPIFFE ID and revision (-before +after):\n%s", diff)
	}
}

// startController runs spire-registrar's controllers in this process, as the binary runs
// them, until ready: every controller finished its first full resync. The returned function
// stops them and waits until they have; it also runs when the test ends.
func startController(t *testing.T, stack *realcluster.Stack) (stop func()) {
	t.Helper()
	cfg, err := config.Parse(fmt.Appendf(nil, `apiVersion: spire.spiffe.io/v1alpha1
kind: ControllerManagerConfig
trustDomain: %s
clusterName: scale
clusterDomain: cluster.local
className: %s
spireServerSocketPath: %s
gcInterval: %s
`, stack.SPIRE.TrustDomain(), className, stack.SPIRE.SocketPath(), gcInterval))
	if err != nil {
		t.Fatal(err)
	}
	client, err := spire.Dial(t.Context(), stack.SPIRE.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	kubeInformers, spireInformers := app.NewInformerFactories(stack.Client, stack.SpireAPI)
	controllers, err := app.NewControllers(ctx, app.ControllerContext{
		Config: cfg, KubeClient: stack.Client, SpireAPIClient: stack.SpireAPI,
		KubeInformers: kubeInformers, SpireInformers: spireInformers, SPIRE: client,
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	kubeInformers.Start(ctx.Done())
	spireInformers.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		app.RunControllers(ctx, controllers, workers)
		kubeInformers.Shutdown()
		spireInformers.Shutdown()
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
			_ = client.Close()
		})
	}
	t.Cleanup(stop)
	err = wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		for _, c := range controllers {
			if !c.HasSynced() {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("controllers not ready: %v", err)
	}
	return stop
}

// createPods creates n pods on the test's node, a few at a time, and returns them.
func createPods(t *testing.T, stack *realcluster.Stack, n int) []*corev1.Pod {
	t.Helper()
	out := make([]*corev1.Pod, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i], errs[i] = realcluster.CreatePod(t.Context(), stack.Client, namespace, fmt.Sprintf("pod-%03d", i), nodeName)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// waitEntries waits until the spire-server CLI shows want entries and returns them.
func waitEntries(t *testing.T, s *realcluster.SPIRE, want int) []realcluster.Entry {
	t.Helper()
	var entries []realcluster.Entry
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		entries, err = s.EntryShow(ctx)
		return len(entries) >= want, err
	})
	if err != nil {
		t.Fatalf("spire-server shows %d entries, want %d: %v", len(entries), want, err)
	}
	return entries
}

// checkKPerPod checks that every pod has exactly its k entries, one per ClusterSPIFFEID,
// selected by its UID, and that no SPIFFE ID has two entries.
func checkKPerPod(t *testing.T, pods []*corev1.Pod, entries []realcluster.Entry, td string) {
	t.Helper()
	got := map[string][]string{}
	for _, e := range entries {
		for _, s := range e.Selectors {
			if s.Type == "k8s" && strings.HasPrefix(s.Value, "pod-uid:") {
				uid := strings.TrimPrefix(s.Value, "pod-uid:")
				got[uid] = append(got[uid], e.SPIFFEID)
			}
		}
	}
	want := map[string][]string{}
	for _, pod := range pods {
		for j := range k {
			want[string(pod.UID)] = append(want[string(pod.UID)], fmt.Sprintf("spiffe://%s/k%d/ns/%s/pod/%s", td, j, pod.Namespace, pod.Name))
		}
	}
	for _, ids := range got {
		slices.Sort(ids)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("SPIFFE IDs of each pod's entries, by pod UID (-want +got):\n%s", diff)
	}
	if len(entries) != len(pods)*k {
		t.Errorf("spire-server shows %d entries, want exactly %d", len(entries), len(pods)*k)
	}
}

// entryRevision is what a restart must leave alone in an entry.
type entryRevision struct {
	SPIFFEID string
	Revision int64
}

func entryRevisions(entries []realcluster.Entry) map[string]entryRevision {
	out := map[string]entryRevision{}
	for _, e := range entries {
		out[e.ID] = entryRevision{SPIFFEID: e.SPIFFEID, Revision: e.RevisionNumber}
	}
	return out
}

// scrapeEntryWrites reads SPIRE's entry write counters, in the order of entryWriteMetrics. A
// counter SPIRE has not incremented yet is absent and reads as zero.
func scrapeEntryWrites(t *testing.T, s *realcluster.SPIRE) []float64 {
	t.Helper()
	resp, err := http.Get(s.MetricsURL())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float64, len(entryWriteMetrics))
	for line := range strings.Lines(string(body)) {
		for i, name := range entryWriteMetrics {
			rest, ok := strings.CutPrefix(line, name)
			if !ok || (!strings.HasPrefix(rest, "{") && !strings.HasPrefix(rest, " ")) {
				continue
			}
			fields := strings.Fields(rest[strings.LastIndex(rest, "}")+1:])
			v, err := strconv.ParseFloat(fields[0], 64)
			if err != nil {
				t.Fatalf("malformed series %q: %v", line, err)
			}
			out[i] += v
		}
	}
	return out
}
