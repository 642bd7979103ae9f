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
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	entryv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/entry/v1"
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	spireclientset "github.com/spire-registrar/spire-registrar/generated/clientset/versioned"
	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/app"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

const (
	// clusterName is the config's clusterName; it only shapes parent IDs.
	clusterName = "bench"
	// podsPerNode sets how many Node objects a run creates: N/podsPerNode, at least one.
	podsPerNode = 100
	// spiffeIDTemplate gives every pod its own SPIFFE ID, so that duplicates are visible.
	spiffeIDTemplate = "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/pod/{{ .PodMeta.Name }}"
	// podUIDSelector is the value prefix of the k8s selector every pod entry carries.
	podUIDSelector = "pod-uid:"
)

// cluster is the Kubernetes side every run shares: one etcd and kube-apiserver with the CRDs
// applied. Runs use their own namespace and controller class, and remove their pods at the
// end, so that a run's informers hold no other run's pods.
type cluster struct {
	kube *realcluster.Kube
	// kubeClient has client-side rate limits high enough that pod creation is bound by the
	// apiserver, not by the client.
	kubeClient kubernetes.Interface
	spireAPI   spireclientset.Interface
	logf       realcluster.Logf
}

// startCluster starts the light world (etcd and kube-apiserver only), or with full the full
// world, where kube-scheduler, kube-controller-manager and kwok make, place and run pods.
func startCluster(ctx context.Context, logf realcluster.Logf, full bool) (*cluster, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	kube, err := realcluster.StartKube(ctx, realcluster.KubeOptions{
		Logf: logf, Full: full,
		// A cell's pods go in one DeleteCollection, which the apiserver otherwise runs one
		// delete at a time: 30k pods took more than 9 minutes.
		ExtraAPIServerArgs: []string{"--delete-collection-workers=16"},
	})
	if err != nil {
		return nil, err
	}
	c := &cluster{kube: kube, logf: logf}
	ok := false
	defer func() {
		if !ok {
			c.stop()
		}
	}()
	dir, err := realcluster.CRDsDir()
	if err != nil {
		return nil, err
	}
	if _, err := realcluster.ApplyCRDs(ctx, kube.RESTConfig(), dir); err != nil {
		return nil, err
	}
	cfg := kube.RESTConfig()
	cfg.QPS, cfg.Burst = 10000, 10000
	if c.kubeClient, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("build kube client: %w", err)
	}
	if c.spireAPI, err = spireclientset.NewForConfig(kube.RESTConfig()); err != nil {
		return nil, fmt.Errorf("build spire.spiffe.io client: %w", err)
	}
	ok = true
	return c, nil
}

func (c *cluster) stop() {
	if err := c.kube.Stop(); err != nil {
		c.logf("stopping kube: %v", err)
	}
}

// run is one controller, running in-process through pkg/app as the binary runs it, against a
// fresh SPIRE server, with one ClusterSPIFFEID selecting every pod of the run's namespace.
type run struct {
	c    *cluster
	name string // namespace, controller class and ClusterSPIFFEID name
	// nodes are the names of the run's Node objects; pods are spread over them.
	nodes []string

	spire *realcluster.SPIRE
	// client is the controller's connection to SPIRE; batching wraps it and is what the
	// controller writes through.
	client   *spire.Client
	batching *spire.BatchingClient
	// rawConn and raw are the bench's own connection for polling SPIRE, independent of the
	// controller's client.
	rawConn *grpc.ClientConn
	raw     entryv1.EntryClient

	cancel   context.CancelFunc
	done     chan struct{}
	stopOnce sync.Once
}

// runSpec says what a run starts.
type runSpec struct {
	// name is the namespace, controller class and ClusterSPIFFEID name.
	name string
	// nodes is how many light-world Node objects to create for the run's own pods; the full
	// world's kwok nodes are shared by every run and made by the caller.
	nodes    int
	workers  int
	batching spire.BatchingOptions
	// postgres, if set, keeps the fresh SPIRE server's datastore in a new database on it
	// instead of sqlite.
	postgres *realcluster.Postgres
}

// startRun starts a SPIRE server on sqlite, creates the namespace, n/podsPerNode nodes and the
// ClusterSPIFFEID, and runs the controller with the given number of workers, writing through a
// BatchingClient with the given options, until it is ready.
func (c *cluster) startRun(ctx context.Context, name string, n, workers int, batching spire.BatchingOptions) (*run, error) {
	return c.startRunSpec(ctx, runSpec{name: name, nodes: max(1, n/podsPerNode), workers: workers, batching: batching})
}

// startRunSpec starts the run the spec describes; see startRun.
func (c *cluster) startRunSpec(ctx context.Context, spec runSpec) (_ *run, err error) {
	name, workers, batching := spec.name, spec.workers, spec.batching
	r, err := c.startBareRun(ctx, name, spec.nodes, spec.postgres)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			r.stop(context.WithoutCancel(ctx))
		}
	}()
	if r.client, err = spire.Dial(ctx, r.spire.SocketPath()); err != nil {
		return nil, err
	}
	if err := r.client.WaitReady(ctx); err != nil {
		return nil, err
	}
	r.batching = spire.NewBatchingClient(r.client, batching)
	if _, err := c.spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, &spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: spirev1alpha1.ClusterSPIFFEIDSpec{
			ClassName:        name,
			SPIFFEIDTemplate: spiffeIDTemplate,
			NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: name},
			},
		},
	}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create ClusterSPIFFEID %s: %w", name, err)
	}

	// The config file a user would write, with the default resync interval: the idle
	// window measures what the controller costs at rest with the defaults.
	cfg, err := config.Parse(fmt.Appendf(nil, `apiVersion: spire.spiffe.io/v1alpha1
kind: ControllerManagerConfig
trustDomain: %s
clusterName: %s
className: %s
spireServerSocketPath: %s
`, r.spire.TrustDomain(), clusterName, name, r.spire.SocketPath()))
	if err != nil {
		return nil, fmt.Errorf("controller config: %w", err)
	}
	kubeClient, err := kubernetes.NewForConfig(c.kube.RESTConfig())
	if err != nil {
		return nil, fmt.Errorf("build controller kube client: %w", err)
	}
	spireAPI, err := spireclientset.NewForConfig(c.kube.RESTConfig())
	if err != nil {
		return nil, fmt.Errorf("build controller spire.spiffe.io client: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.cancel = cancel
	kubeInformers, spireInformers := app.NewInformerFactories(kubeClient, spireAPI)
	controllers, err := app.NewControllers(runCtx, app.ControllerContext{
		Config: cfg, KubeClient: kubeClient, SpireAPIClient: spireAPI,
		KubeInformers: kubeInformers, SpireInformers: spireInformers,
		SPIRE: spire.BatchedAPI{BatchingClient: r.batching, FederationClient: r.client},
	})
	if err != nil {
		cancel()
		close(r.done)
		return nil, fmt.Errorf("construct controllers: %w", err)
	}
	kubeInformers.Start(runCtx.Done())
	spireInformers.Start(runCtx.Done())
	go func() {
		defer close(r.done)
		app.RunControllers(runCtx, controllers, workers)
		kubeInformers.Shutdown()
		spireInformers.Shutdown()
	}()
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		for _, ctrl := range controllers {
			if !ctrl.HasSynced() {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("wait for the controller to be ready: %w", err)
	}
	return r, nil
}

// startBareRun starts what every run has whichever controller it measures: a fresh SPIRE
// server (on a new database of postgres, or on sqlite when postgres is nil), the bench's own
// connection to it, the namespace and nodes Node objects (none in the full world, whose kwok
// nodes the caller makes). It starts no controller: the run's stop stops what it finds.
func (c *cluster) startBareRun(ctx context.Context, name string, nodes int, postgres *realcluster.Postgres) (_ *run, err error) {
	r := &run{c: c, name: name, done: make(chan struct{})}
	defer func() {
		if err != nil {
			r.stop(context.WithoutCancel(ctx))
		}
	}()
	if r.spire, err = realcluster.StartSPIRE(ctx, realcluster.SPIREOptions{Logf: c.logf, Postgres: postgres}); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(r.spire.SocketPath())
	if err != nil {
		return nil, fmt.Errorf("resolve spire socket: %w", err)
	}
	if r.rawConn, err = grpc.NewClient("unix://"+abs, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20))); err != nil {
		return nil, fmt.Errorf("connect to spire server: %w", err)
	}
	r.raw = entryv1.NewEntryClient(r.rawConn)

	if err := realcluster.EnsureNamespace(ctx, c.kubeClient, name); err != nil {
		return nil, err
	}
	if c.kube.Full() {
		// The ServiceAccount admission plugin refuses pods until the namespace's default
		// service account exists.
		if err := realcluster.WaitServiceAccount(ctx, c.kubeClient, name, "default"); err != nil {
			return nil, err
		}
	}
	for i := range nodes {
		node, err := realcluster.CreateNode(ctx, c.kubeClient, fmt.Sprintf("%s-node-%03d", name, i))
		if err != nil {
			return nil, err
		}
		r.nodes = append(r.nodes, node.Name)
	}
	return r, nil
}

// stop stops the controller and SPIRE and force-deletes the run's pods: no kubelet runs to
// finish a graceful deletion.
func (r *run) stop(ctx context.Context) {
	r.stopOnce.Do(func() {
		if r.cancel != nil {
			r.cancel()
			<-r.done
		}
		if r.batching != nil {
			r.batching.Close()
		}
		if r.client != nil {
			_ = r.client.Close()
		}
		if r.rawConn != nil {
			_ = r.rawConn.Close()
		}
		if r.spire != nil {
			if err := r.spire.Stop(); err != nil {
				r.c.logf("stopping spire-server: %v", err)
			}
		}
		zero := int64(0)
		err := r.c.kubeClient.CoreV1().Pods(r.name).DeleteCollection(ctx,
			metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		if err != nil {
			r.c.logf("deleting pods of %s: %v", r.name, err)
		}
		// At 30k pods the apiserver is still deleting when its DeleteCollection call times
		// out: the next cell must not run beside that.
		start := time.Now()
		if err := wait.PollUntilContextTimeout(ctx, time.Second, 15*time.Minute, true, func(ctx context.Context) (bool, error) {
			pods, err := r.c.kubeClient.CoreV1().Pods(r.name).List(ctx, metav1.ListOptions{Limit: 1})
			return err == nil && len(pods.Items) == 0, nil
		}); err != nil {
			r.c.logf("pods of %s still not deleted after %v: %v", r.name, time.Since(start).Round(time.Second), err)
			return
		}
		r.c.logf("pods of %s deleted %v after the delete call", r.name, time.Since(start).Round(time.Second))
	})
}

// createPods creates n pods named prefix-<i> with the given concurrency, spread over the
// run's nodes. It returns the time just before the first create and the time the last one
// returned.
func (r *run) createPods(ctx context.Context, prefix string, n, concurrency int) (first, last time.Time, err error) {
	var next atomic.Int64
	var errOnce sync.Once
	var firstErr error
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	first = time.Now()
	for range min(concurrency, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if _, err := realcluster.CreatePod(ctx, r.c.kubeClient, r.name, fmt.Sprintf("%s-%06d", prefix, i), r.nodes[i%len(r.nodes)]); err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	return first, time.Now(), firstErr
}

// countEntries counts SPIRE's entries with a listing of IDs only, which is far cheaper for
// the server to send and for the bench to decode than full entries.
func (r *run) countEntries(ctx context.Context) (int, error) {
	n, token := 0, ""
	for {
		resp, err := r.raw.ListEntries(ctx, &entryv1.ListEntriesRequest{
			PageSize: 10000, PageToken: token, OutputMask: &spiretypes.EntryMask{},
		})
		if err != nil {
			return 0, fmt.Errorf("count entries: %w", err)
		}
		n += len(resp.GetEntries())
		if token = resp.GetNextPageToken(); token == "" {
			return n, nil
		}
	}
}

// waitForCount waits until SPIRE holds want entries and returns when the listing that saw
// them returned (an upper bound of the moment they all existed).
//
// Listing every entry costs the server that is being measured real CPU at thousands of
// entries, so SPIRE is listed every 20ms only once the controller has sent at least want items
// to it (read from its batching client's counters, which cost nothing to read) and every 2s
// before that, which also covers a controller whose counters never get there.
func (r *run) waitForCount(ctx context.Context, want int, start time.Time, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	var lastList time.Time
	lastLogged := int64(0)
	for {
		sent := r.batching.Stats().Items
		if sent >= int64(want) && time.Since(lastList) >= 20*time.Millisecond || time.Since(lastList) >= 2*time.Second {
			lastList = time.Now()
			n, err := r.countEntries(ctx)
			if err != nil {
				return time.Time{}, err
			}
			if n == want {
				return time.Now(), nil
			}
			if n > want {
				return time.Time{}, fmt.Errorf("spire holds %d entries, more than the %d expected", n, want)
			}
			if time.Now().After(deadline) {
				return time.Time{}, fmt.Errorf("timed out after %v with %d of %d entries", timeout, n, want)
			}
		}
		if step := int64(max(want/5, 1)); sent/step > lastLogged/step && want >= 1000 {
			r.c.logf("  controller sent %d/%d entries to SPIRE after %v", sent, want, time.Since(start).Round(time.Millisecond))
			lastLogged = sent
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// entriesForPod lists the entries carrying a pod's UID selector, IDs only.
func (r *run) entriesForPod(ctx context.Context, uid string) (int, error) {
	resp, err := r.raw.ListEntries(ctx, &entryv1.ListEntriesRequest{
		Filter: &entryv1.ListEntriesRequest_Filter{
			BySelectors: &spiretypes.SelectorMatch{
				Selectors: []*spiretypes.Selector{{Type: "k8s", Value: podUIDSelector + uid}},
				Match:     spiretypes.SelectorMatch_MATCH_SUPERSET,
			},
		},
		OutputMask: &spiretypes.EntryMask{},
	})
	if err != nil {
		return 0, fmt.Errorf("list entries of pod %s: %w", uid, err)
	}
	return len(resp.GetEntries()), nil
}

// podLatency creates one pod and returns the time from just before the create call until
// SPIRE serves its entry, polling every 2ms.
func (r *run) podLatency(ctx context.Context, name string, timeout time.Duration) (time.Duration, error) {
	return r.podEntriesLatency(ctx, name, 1, timeout)
}

// podEntriesLatency creates one pod and returns the time from just before the create call
// until SPIRE serves want entries for it, polling every 2ms.
func (r *run) podEntriesLatency(ctx context.Context, name string, want int, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	pod, err := realcluster.CreatePod(ctx, r.c.kubeClient, r.name, name, r.nodes[0])
	if err != nil {
		return 0, err
	}
	deadline := start.Add(timeout)
	for {
		n, err := r.entriesForPod(ctx, string(pod.UID))
		if err != nil {
			return 0, err
		}
		if n >= want {
			return time.Since(start), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%d of %d entries for pod %s after %v", n, want, name, timeout)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// verify checks that SPIRE holds exactly one entry per pod of the run's namespace, with the
// SPIFFE ID the ClusterSPIFFEID declares, and nothing else.
func (r *run) verify(ctx context.Context) error {
	pods, err := r.c.kubeClient.CoreV1().Pods(r.name).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	entries, err := r.client.ListEntries(ctx)
	if err != nil {
		return err
	}
	td := r.spire.TrustDomain()
	return checkPodEntries(pods.Items, entries, func(pod corev1.Pod) []string {
		return []string{fmt.Sprintf("spiffe://%s/ns/%s/pod/%s", td, pod.Namespace, pod.Name)}
	})
}
