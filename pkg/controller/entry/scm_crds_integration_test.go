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

package entry_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	spireclientset "github.com/spire-registrar/spire-registrar/generated/clientset/versioned"
	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// scmCRDsDir is where spire-controller-manager v0.7.0's own CRDs are in the module cache.
func scmCRDsDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOMODCACHE: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "github.com", "spiffe", "spire-controller-manager@v0.7.0", "config", "crd", "bases")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("spire-controller-manager v0.7.0 is not in the module cache (go mod download github.com/spiffe/spire-controller-manager@v0.7.0): %v", err)
	}
	return dir
}

// useSCMCRDs replaces the shared apiserver's CRDs with spire-controller-manager's, whose status
// schema has no conditions, until the test ends.
func useSCMCRDs(t *testing.T) {
	t.Helper()
	k := realKube(t)
	if _, err := realcluster.ApplyCRDs(context.Background(), k.RESTConfig(), scmCRDsDir(t)); err != nil {
		t.Fatalf("applying spire-controller-manager's CRDs: %v", err)
	}
	t.Cleanup(func() {
		dir, err := realcluster.CRDsDir()
		if err == nil {
			_, err = realcluster.ApplyCRDs(context.Background(), k.RESTConfig(), dir)
		}
		if err != nil {
			t.Errorf("restoring the project's CRDs: %v", err)
		}
	})
}

// statusWrites counts the status updates made through a client.
type statusWrites struct {
	rt    http.RoundTripper
	count atomic.Int64
}

func (s *statusWrites) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPut && strings.HasSuffix(req.URL.Path, "/status") {
		s.count.Add(1)
	}
	return s.rt.RoundTrip(req)
}

// TestStatusSettlesOnSCMCRDs runs on the CRDs the official chart installs. The API server
// prunes the status conditions they lack; status must still be written only when what the
// schema keeps changes, not at every resync. Writes are counted as calls: the API server turns
// an update that pruning makes a no-op into no change of resourceVersion, so the versions
// alone would not show a loop of writes.
func TestStatusSettlesOnSCMCRDs(t *testing.T) {
	useSCMCRDs(t)
	e := newITEnv(t)
	writes := &statusWrites{}
	cfg := rest.CopyConfig(realKube(t).RESTConfig())
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { writes.rt = rt; return writes })
	var err error
	if e.spireAPI, err = spireclientset.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	ns := e.namespace("apps", map[string]string{"team": e.prefix})
	node := e.node("node")
	e.pod(ns, "web", node.Name, map[string]string{"app": "web"})
	clusterSPIFFEID := e.clusterSPIFFEID("web", spirev1alpha1.ClusterSPIFFEIDSpec{
		SPIFFEIDTemplate:  "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/sa/{{ .PodSpec.ServiceAccountName }}",
		NamespaceSelector: sel(map[string]string{"team": e.prefix}), PodSelector: sel(map[string]string{"app": "web"}),
	})
	cse := e.staticEntry("db", spirev1alpha1.ClusterStaticEntrySpec{
		SPIFFEID: "spiffe://example.org/db", ParentID: "spiffe://example.org/spire/server", Selectors: []string{"unix:uid:999"}})

	// Full resyncs every second, each of which revisits every ClusterStaticEntry's status.
	e.startController("gcInterval: 1s\n")
	e.waitForSPIFFEIDs("spiffe://example.org/db", "spiffe://example.org/ns/"+ns+"/sa/web")
	e.waitForStats(clusterSPIFFEID.Name, spirev1alpha1.ClusterSPIFFEIDStats{NamespacesSelected: 1, PodsSelected: 1, EntriesToSet: 1})
	e.eventually("ClusterStaticEntry status", 30*time.Second, func() (bool, error) {
		got, err := e.spireAPI.SpireV1alpha1().ClusterStaticEntries().Get(e.ctx, cse.Name, metav1.GetOptions{})
		return err == nil && got.Status.Rendered && got.Status.Set && !got.Status.Masked, err
	})

	versions := func() (string, string) {
		t.Helper()
		c, err := e.spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Get(e.ctx, clusterSPIFFEID.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s, err := e.spireAPI.SpireV1alpha1().ClusterStaticEntries().Get(e.ctx, cse.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Status.Conditions)+len(s.Status.Conditions) > 0 {
			t.Fatalf("conditions survived a schema without them: %v %v", c.Status.Conditions, s.Status.Conditions)
		}
		return c.ResourceVersion, s.ResourceVersion
	}
	// Let the first writes, which teach the controller that conditions are pruned, settle.
	time.Sleep(3 * time.Second)
	c1, s1 := versions()
	w1 := writes.count.Load()
	time.Sleep(5 * time.Second)
	if c2, s2 := versions(); c2 != c1 || s2 != s1 {
		t.Errorf("status rewritten after convergence: ClusterSPIFFEID resourceVersion %s -> %s, ClusterStaticEntry %s -> %s", c1, c2, s1, s2)
	}
	if w2 := writes.count.Load(); w2 != w1 {
		t.Errorf("%d status writes in 5s after convergence (%d before), want none", w2-w1, w1)
	}
	t.Logf("status writes until convergence: %d", w1)
}
