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
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2/ktesting"

	spireclientset "github.com/spire-registrar/spire-registrar/generated/clientset/versioned"
	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/app"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

var envCounter atomic.Int64

// itEnv is one integration test's world: the shared real kube-apiserver, a real SPIRE server
// of its own, and a controller class of its own so that no other test's resources count.
type itEnv struct {
	t        *testing.T
	ctx      context.Context
	prefix   string
	kube     kubernetes.Interface
	spireAPI spireclientset.Interface
	spire    *realcluster.SPIRE
	client   *spire.Client
}

func newITEnv(t *testing.T) *itEnv {
	t.Helper()
	k := realKube(t)
	_, ctx := ktesting.NewTestContext(t)
	e := &itEnv{t: t, ctx: ctx, prefix: fmt.Sprintf("it%d", envCounter.Add(1))}
	var err error
	if e.kube, err = kubernetes.NewForConfig(k.RESTConfig()); err != nil {
		t.Fatal(err)
	}
	if e.spireAPI, err = spireclientset.NewForConfig(k.RESTConfig()); err != nil {
		t.Fatal(err)
	}
	e.spire = realcluster.NewSPIRE(t, realcluster.SPIREOptions{})
	if e.client, err = spire.Dial(ctx, e.spire.SocketPath()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.client.Close() })
	return e
}

// name makes a cluster-unique name for this test.
func (e *itEnv) name(s string) string { return e.prefix + "-" + s }

// configYAML is the test's config file; extra lines are appended. The resync interval is an
// hour unless extra sets one, so that tests prove the event path alone.
func (e *itEnv) configYAML(class, extra string) string {
	if !strings.Contains(extra, "gcInterval:") {
		extra += "gcInterval: 1h\n"
	}
	return fmt.Sprintf(`apiVersion: spire.spiffe.io/v1alpha1
kind: ControllerManagerConfig
trustDomain: example.org
clusterName: it
className: %s
spireServerSocketPath: %s
%s`, class, e.spire.SocketPath(), extra)
}

// countingClient counts the SPIRE calls the controller makes.
type countingClient struct {
	spire.API
	lists, writes atomic.Int64
}

func (c *countingClient) ListEntries(ctx context.Context) ([]*spiretypes.Entry, error) {
	c.lists.Add(1)
	return c.API.ListEntries(ctx)
}

// Probe passes the controller's probe on uncounted: it is not a listing.
func (c *countingClient) Probe(ctx context.Context) error {
	return spire.Probe(ctx, c.API)
}

func (c *countingClient) CreateEntries(ctx context.Context, es []*spiretypes.Entry) ([]spire.EntryResult, error) {
	c.writes.Add(1)
	return c.API.CreateEntries(ctx, es)
}

func (c *countingClient) UpdateEntries(ctx context.Context, es []*spiretypes.Entry, m *spiretypes.EntryMask) ([]spire.EntryResult, error) {
	c.writes.Add(1)
	return c.API.UpdateEntries(ctx, es, m)
}

func (c *countingClient) DeleteEntries(ctx context.Context, ids []string) ([]spire.DeleteResult, error) {
	c.writes.Add(1)
	return c.API.DeleteEntries(ctx, ids)
}

// runningController is a controller running in-process through pkg/app, as the binary runs it.
type runningController struct {
	calls *countingClient
	ready func() bool
	stop  func()
}

// startController runs the controllers with the test's config until the returned stop is
// called (or the test ends), and waits until they are ready.
func (e *itEnv) startController(extraConfig string) *runningController {
	e.t.Helper()
	return e.startControllerOfClass(e.prefix, extraConfig)
}

// startControllerOfClass runs a controller that handles the resources of another class, and
// waits until it is ready.
func (e *itEnv) startControllerOfClass(class, extraConfig string) *runningController {
	e.t.Helper()
	rc := e.launchController(class, extraConfig, nil)
	e.eventually("controller ready", 30*time.Second, func() (bool, error) { return rc.ready(), nil })
	return rc
}

// launchController runs the controllers of a class like startControllerOfClass, but returns at
// once instead of waiting until they are ready, for tests that start it while something is
// broken. wrap, if set, decorates the SPIRE client the controller gets (inside the counter).
func (e *itEnv) launchController(class, extraConfig string, wrap func(spire.API) spire.API) *runningController {
	e.t.Helper()
	cfg, err := config.Parse([]byte(e.configYAML(class, extraConfig)))
	if err != nil {
		e.t.Fatalf("config: %v", err)
	}
	var api spire.API = e.client
	if wrap != nil {
		api = wrap(api)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	calls := &countingClient{API: api}
	kubeInformers, spireInformers := app.NewInformerFactories(e.kube, e.spireAPI)
	cc := app.ControllerContext{Config: cfg, KubeClient: e.kube, SpireAPIClient: e.spireAPI,
		KubeInformers: kubeInformers, SpireInformers: spireInformers, SPIRE: calls}
	controllers, err := app.NewControllers(ctx, cc)
	if err != nil {
		cancel()
		e.t.Fatalf("constructing controllers: %v", err)
	}
	kubeInformers.Start(ctx.Done())
	spireInformers.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() { app.RunControllers(ctx, controllers, 4) })
	var once sync.Once
	rc := &runningController{
		calls: calls,
		ready: func() bool {
			for _, c := range controllers {
				if !c.HasSynced() {
					return false
				}
			}
			return true
		},
		stop: func() {
			once.Do(func() {
				cancel()
				wg.Wait()
				kubeInformers.Shutdown()
				spireInformers.Shutdown()
			})
		},
	}
	e.t.Cleanup(rc.stop)
	return rc
}

// eventually polls cond every 20ms until it holds.
func (e *itEnv) eventually(what string, timeout time.Duration, cond func() (bool, error)) {
	e.t.Helper()
	var lastErr error
	err := wait.PollUntilContextTimeout(e.ctx, 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		ok, err := cond()
		lastErr = err
		return ok && err == nil, nil
	})
	if err != nil {
		e.t.Fatalf("timed out waiting for %s (last error: %v)", what, lastErr)
	}
}

// entries lists SPIRE's entries through the API (fast, for polling).
func (e *itEnv) entries() []*spiretypes.Entry {
	e.t.Helper()
	es, err := e.client.ListEntries(e.ctx)
	if err != nil {
		e.t.Fatalf("listing entries: %v", err)
	}
	return es
}

// oracle lists SPIRE's entries with the real spire-server CLI, for final assertions.
func (e *itEnv) oracle() []realcluster.Entry {
	e.t.Helper()
	es, err := e.spire.EntryShow(e.ctx)
	if err != nil {
		e.t.Fatalf("spire-server entry show: %v", err)
	}
	return es
}

// entriesByID maps the CLI's entries by SPIFFE ID, failing on duplicates.
func (e *itEnv) oracleBySPIFFEID() map[string]realcluster.Entry {
	e.t.Helper()
	out := map[string]realcluster.Entry{}
	for _, en := range e.oracle() {
		if _, dup := out[en.SPIFFEID]; dup {
			e.t.Errorf("duplicate entries for %s", en.SPIFFEID)
		}
		out[en.SPIFFEID] = en
	}
	return out
}

// spiffeIDs returns the sorted SPIFFE IDs of entries.
func spiffeIDs(es []*spiretypes.Entry) []string {
	var out []string
	for _, en := range es {
		out = append(out, "spiffe://"+en.GetSpiffeId().GetTrustDomain()+en.GetSpiffeId().GetPath())
	}
	slices.Sort(out)
	return out
}

// waitForSPIFFEIDs waits until SPIRE holds exactly the given SPIFFE IDs.
func (e *itEnv) waitForSPIFFEIDs(want ...string) {
	e.t.Helper()
	slices.Sort(want)
	var got []string
	e.eventually(fmt.Sprintf("entries %v", want), 30*time.Second, func() (bool, error) {
		got = spiffeIDs(e.entries())
		return slices.Equal(got, want), nil
	})
}

func (e *itEnv) namespace(name string, labels map[string]string) string {
	e.t.Helper()
	ns := e.name(name)
	if _, err := e.kube.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	return ns
}

func (e *itEnv) node(name string) *corev1.Node {
	e.t.Helper()
	n, err := realcluster.CreateNode(e.ctx, e.kube, e.name(name))
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// pod creates a pod on a node with a service account named like the pod.
func (e *itEnv) pod(ns, name, node string, labels map[string]string) *corev1.Pod {
	e.t.Helper()
	p, err := realcluster.CreatePod(e.ctx, e.kube, ns, name, node, func(p *corev1.Pod) {
		p.Labels = labels
		p.Spec.ServiceAccountName = name
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// clusterSPIFFEID creates a ClusterSPIFFEID of the test's class.
func (e *itEnv) clusterSPIFFEID(name string, spec spirev1alpha1.ClusterSPIFFEIDSpec) *spirev1alpha1.ClusterSPIFFEID {
	e.t.Helper()
	if spec.ClassName == "" {
		spec.ClassName = e.prefix
	}
	clusterSPIFFEID, err := e.spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(e.ctx, &spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: e.name(name)}, Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return clusterSPIFFEID
}

// waitForStats waits until a ClusterSPIFFEID's status reports the given stats.
func (e *itEnv) waitForStats(name string, want spirev1alpha1.ClusterSPIFFEIDStats) {
	e.t.Helper()
	var got spirev1alpha1.ClusterSPIFFEIDStats
	e.eventually("stats of "+name, 30*time.Second, func() (bool, error) {
		clusterSPIFFEID, err := e.spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got = clusterSPIFFEID.Status.Stats
		return got == want, nil
	})
}

func sel(labels map[string]string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: labels}
}

func selectorStrings(s []realcluster.Selector) string {
	var out []string
	for _, v := range s {
		out = append(out, v.String())
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}
