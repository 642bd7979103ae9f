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

package restore

import (
	"context"
	"fmt"
	"log"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/spire-registrar/spire-registrar/pkg/spire"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if err := realcluster.RemoveRegistrarBinary(); err != nil {
		log.Printf("remove the spire-registrar binary: %v", err)
	}
	os.Exit(code)
}

const (
	// pods is how many pods the backup knows; churn of them are deleted after it, and as many
	// created.
	pods  = 30
	churn = 10
	// gcInterval is far longer than the test, so that the periodic full resync cannot be what
	// repairs SPIRE.
	gcInterval = 10 * time.Minute
	// repairBound is how long after SPIRE's return it must hold exactly what is declared again.
	// It takes about a second: gRPC retries the connection every second at most, and a full
	// resync of a few dozen entries takes milliseconds.
	repairBound = 20 * time.Second

	entryController      = "spire-registrar-entry-controller"
	federationController = "spire-registrar-federation-controller"
)

// TestSPIRERestoredFromAnOlderBackup stops SPIRE, backs its datastore up, brings it back,
// changes the cluster (pods deleted and created, a federated trust domain dropped and another
// added) until SPIRE holds the change, then stops SPIRE again, restores the backup and starts
// it: the controller, which kept running, must make SPIRE hold exactly what is declared again
// within repairBound, with gcInterval at 10 minutes, by writing only what the restore undid.
//
// Before the reconnection watch, the entry cache went on believing SPIRE held what the
// controller had written, and SPIRE kept the deleted pods' identities, and lacked the new
// pods', until the next periodic resync: this test then failed at repairBound.
func TestSPIRERestoredFromAnOlderBackup(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real kube-apiserver and spire-server")
	}
	t.Run("sqlite", func(t *testing.T) {
		testRestore(t, realcluster.SPIREOptions{})
	})
	t.Run("postgres", func(t *testing.T) {
		testRestore(t, realcluster.SPIREOptions{Postgres: realcluster.NewPostgres(t, realcluster.PostgresOptions{})})
	})
}

func testRestore(t *testing.T, spireOpts realcluster.SPIREOptions) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	stack := realcluster.NewStackWith(t, realcluster.StackOptions{SPIRE: spireOpts})
	server := stack.SPIRE
	api, err := spire.Dial(ctx, server.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()

	node := createWorld(ctx, t, stack)
	createPartner(ctx, t, stack, "partner-a")
	createPartner(ctx, t, stack, "partner-b")

	declared := want{pods: map[types.UID]string{}, trustDomains: []string{"partner-a.org", "partner-b.org"}}
	createPods(ctx, t, stack, node, declared, "old", pods)

	registrar := realcluster.NewRegistrar(t, realcluster.RegistrarOptions{
		Kubeconfig: stack.Kube.Kubeconfig(),
		Config: fmt.Sprintf("trustDomain: %s\nclusterName: it\ngcInterval: %s\nspireServerSocketPath: %s\n",
			server.TrustDomain(), gcInterval, server.SocketPath()),
	})
	registrar.WaitReady(t)
	waitExact(ctx, t, api, declared, time.Minute, "the first pods")

	// The backup: SPIRE stopped, as an operator stops it to copy its datastore.
	server.Kill()
	backup, err := server.Backup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := server.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("backup taken with %d pod entries and relationships %v", len(declared.pods), declared.trustDomains)

	// What happens after the backup: pods deleted and created, a partner dropped, another added.
	deleted := 0
	for uid, name := range declared.pods {
		if deleted == churn {
			break
		}
		if err := stack.Client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
		delete(declared.pods, uid)
		deleted++
	}
	createPods(ctx, t, stack, node, declared, "new", churn)
	if err := stack.SpireAPI.SpireV1alpha1().ClusterFederatedTrustDomains().Delete(ctx, "partner-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	createPartner(ctx, t, stack, "partner-c")
	declared.trustDomains = []string{"partner-a.org", "partner-c.org"}
	waitExact(ctx, t, api, declared, time.Minute, "the changes made after the backup")

	before, err := registrar.Scrape(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// The restore: SPIRE stopped, its datastore replaced by the backup, SPIRE started.
	server.Kill()
	if err := server.Restore(ctx, backup); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	if err := server.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	exactAfter := waitExact(ctx, t, api, declared, repairBound, "SPIRE restored from the backup")
	t.Logf("SPIRE restored from the backup held exactly what is declared %.2fs after it was back (healthcheck passing; %.2fs after its start)",
		exactAfter.Seconds(), (exactAfter + back.Sub(restarted)).Seconds())

	// What the controller wrote to get there: exactly what the restore undid, nothing else,
	// and by resyncs after the reconnection, not by the periodic one.
	after, err := registrar.Scrape(ctx)
	if err != nil {
		t.Fatal(err)
	}
	items := func(method string) float64 {
		series := `spire_registrar_spire_items_total{method="` + method + `",result="success"}`
		return after[series] - before[series]
	}
	writes := map[string]float64{}
	for _, method := range []string{"BatchCreateEntry", "BatchUpdateEntry", "BatchDeleteEntry",
		"BatchCreateFederationRelationship", "BatchUpdateFederationRelationship", "BatchDeleteFederationRelationship"} {
		writes[method] = items(method)
	}
	wantWrites := map[string]float64{"BatchCreateEntry": churn, "BatchUpdateEntry": 0, "BatchDeleteEntry": churn,
		"BatchCreateFederationRelationship": 1, "BatchUpdateFederationRelationship": 0, "BatchDeleteFederationRelationship": 1}
	for method, n := range wantWrites {
		if writes[method] != n {
			t.Errorf("%s: %v items written after the restore, want %v (all: %v)", method, writes[method], n, writes)
		}
	}
	for _, controller := range []string{entryController, federationController} {
		starts := func(reason string) float64 {
			return after[`spire_registrar_full_resync_starts_total{controller="`+controller+`",reason="`+reason+`"}`]
		}
		if n := starts("interval"); n != 0 {
			t.Errorf("%s ran %v periodic resyncs: the test cannot tell what repaired SPIRE", controller, n)
		}
		if starts("reconnect") == 0 {
			t.Errorf("%s ran no resync after a reconnection to SPIRE", controller)
		}
	}
}

// want is what SPIRE must hold: one entry for each pod, by UID, and the relationships with
// these trust domains, and nothing else.
type want struct {
	pods         map[types.UID]string
	trustDomains []string
}

// waitExact waits at most timeout for SPIRE to hold exactly w, and returns how long it took;
// it fails the test with what SPIRE held last if it does not.
func waitExact(ctx context.Context, t *testing.T, api *spire.Client, w want, timeout time.Duration, what string) time.Duration {
	t.Helper()
	start := time.Now()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var ok bool
		ok, last = exact(ctx, api, w)
		return ok, nil
	})
	if err != nil {
		// The poll's deadline may have cut its last listing short: list once more for the report.
		listCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, state := exact(listCtx, api, w); state != "" {
			last = state
		}
		t.Fatalf("%s: SPIRE does not hold exactly what is declared within %s: %s", what, timeout, last)
	}
	return time.Since(start)
}

// exact reports whether SPIRE holds exactly w, and if not, what differs.
func exact(ctx context.Context, api *spire.Client, w want) (bool, string) {
	entries, err := api.ListEntries(ctx)
	if err != nil {
		return false, err.Error()
	}
	rels, err := api.ListFederationRelationships(ctx)
	if err != nil {
		return false, err.Error()
	}
	perPod := map[types.UID]int{}
	var foreign []string
	for _, e := range entries {
		uid := types.UID("")
		for _, s := range e.GetSelectors() {
			if v, ok := strings.CutPrefix(s.GetValue(), "pod-uid:"); ok && s.GetType() == "k8s" {
				uid = types.UID(v)
			}
		}
		if _, ok := w.pods[uid]; !ok {
			foreign = append(foreign, e.GetSpiffeId().GetPath())
			continue
		}
		perPod[uid]++
	}
	var wrong []string
	for uid, name := range w.pods {
		if perPod[uid] != 1 {
			wrong = append(wrong, fmt.Sprintf("%s has %d", name, perPod[uid]))
		}
	}
	var tds []string
	for _, r := range rels {
		tds = append(tds, r.GetTrustDomain())
	}
	sort.Strings(tds)
	sort.Strings(foreign)
	sort.Strings(wrong)
	if len(foreign) == 0 && len(wrong) == 0 && slices.Equal(tds, w.trustDomains) {
		return true, ""
	}
	return false, fmt.Sprintf("%d entries; not declared: %v; pods without exactly one entry: %v; relationships %v, want %v",
		len(entries), foreign, wrong, tds, w.trustDomains)
}
