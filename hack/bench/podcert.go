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
	"path/filepath"
	"strconv"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	spireclientset "github.com/spire-registrar/spire-registrar/generated/clientset/versioned"
	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// The pod certificate bench's fixed shape: requests spread over a few pods of one node, as a
// kubelet makes one request per pod volume and refresh.
const (
	podCertPods      = 20
	podCertNamespace = "podcert-bench"
	podCertNode      = "podcert-node"
	podCertClass     = "podcert-bench"
)

// podCertResult is what -mode podcert measured.
type podCertResult struct {
	requests       int
	concurrency    int
	latencies      []time.Duration
	bulk           time.Duration
	createsOnly    time.Duration
	registrarReady time.Duration
}

// podCertWorld is what both pod certificate benches run in: the light world with the Node
// authorizer, a SPIRE server, a spire-agent, spire-registrar's binary with an admin and
// downstream entry, the CRDs, and the benches' node, namespace, ClusterSPIFFEID and pods.
type podCertWorld struct {
	n          int // requests: the first -n, default 1000
	logf       func(format string, args ...any)
	outDir     string
	kube       *realcluster.Kube
	spire      *realcluster.SPIRE
	agent      *realcluster.Agent
	bin        string
	admin      kubernetes.Interface
	pods       []*corev1.Pod
	node       *corev1.Node
	nodeClient kubernetes.Interface // acts as the node
	stops      []func()
}

// stop stops what startPodCertWorld started, last first.
func (w *podCertWorld) stop() {
	for i := len(w.stops) - 1; i >= 0; i-- {
		w.stops[i]()
	}
}

// startPodCertWorld starts a podCertWorld whose report goes under -out in a directory named
// after mode; on error, what was started is stopped.
func startPodCertWorld(ctx context.Context, o options, mode string) (w *podCertWorld, err error) {
	w = &podCertWorld{n: o.sizes[0]}
	defer func() {
		if err != nil {
			w.stop()
		}
	}()
	if !flagSet("n") {
		w.n = 1000
	}
	w.logf = func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
	}
	w.outDir = filepath.Join(o.out, mode+"-"+time.Now().Format("20060102-150405"))
	if err := os.MkdirAll(w.outDir, 0o755); err != nil {
		return w, err
	}
	if w.kube, err = realcluster.StartKube(ctx, realcluster.KubeOptions{NodeAuthorization: true, Logf: w.logf}); err != nil {
		return w, err
	}
	w.stops = append(w.stops, func() { _ = w.kube.Stop() })
	if w.spire, err = realcluster.StartSPIRE(ctx, realcluster.SPIREOptions{Logf: w.logf}); err != nil {
		return w, err
	}
	w.stops = append(w.stops, func() { _ = w.spire.Stop() })
	if w.agent, err = realcluster.StartAgent(ctx, realcluster.AgentOptions{Server: w.spire, DiscoverWorkloadPath: true, Logf: w.logf}); err != nil {
		return w, err
	}
	w.stops = append(w.stops, func() { _ = w.agent.Stop() })
	bin, binDir, err := buildRegistrar(ctx)
	if err != nil {
		return w, err
	}
	w.bin = bin
	w.stops = append(w.stops, func() { _ = os.RemoveAll(binDir) })
	registrarID := "spiffe://" + w.spire.TrustDomain() + "/spire-registrar"
	if _, err := w.agent.CreateWorkloadEntryCLI(ctx, registrarID,
		[]string{"unix:uid:" + strconv.Itoa(os.Getuid()), "unix:path:" + bin}, "-admin", "-downstream"); err != nil {
		return w, err
	}
	if err := w.agent.WaitForSVIDCached(ctx, registrarID); err != nil {
		return w, err
	}
	if w.admin, err = w.kube.Client(); err != nil {
		return w, err
	}
	spireAPI, err := spireclientset.NewForConfig(w.kube.RESTConfig())
	if err != nil {
		return w, err
	}
	crds, err := realcluster.CRDsDir()
	if err != nil {
		return w, err
	}
	if _, err := realcluster.ApplyCRDs(ctx, w.kube.RESTConfig(), crds); err != nil {
		return w, err
	}
	if w.pods, w.node, err = podCertWorkload(ctx, w.admin, spireAPI); err != nil {
		return w, err
	}
	w.nodeClient, err = w.kube.NodeClient(w.node.Name)
	return w, err
}

// runPodCertBench is -mode podcert: in the light world with the Node authorizer, a SPIRE
// server, a spire-agent and spire-registrar's binary signing PodCertificateRequests with a
// downstream CA, it measures, for N requests (the first -n, default 1000) made as the node:
//
//   - latency: one request at a time, from just before the create call until the watch
//     delivers the request with its certificate chain; p50 and p99;
//   - throughput: N requests created by -concurrency workers at once, from the first create
//     call until the last is issued: requests per second one replica sustains; and, as the
//     API server's own ceiling, the same creates with spire-registrar stopped.
func runPodCertBench(ctx context.Context, o options) error {
	wld, err := startPodCertWorld(ctx, o, "podcert")
	if err != nil {
		return err
	}
	defer wld.stop()
	n, logf, outDir, kube, spireServer, agent, bin, admin := wld.n, wld.logf, wld.outDir, wld.kube, wld.spire, wld.agent, wld.bin, wld.admin
	pods, node, nodeClient := wld.pods, wld.node, wld.nodeClient

	res := podCertResult{requests: n, concurrency: o.concurrency}
	start := func() (*registrarProcess, error) {
		p, ready, err := startRegistrar(ctx, bin, outDir, "spire-registrar", registrarConfig{
			className: podCertClass, spire: spireServer, kubeconfig: kube.Kubeconfig(), workers: o.workers,
			// Only the node makes requests here, but the bench's kube-apiserver has not the
			// node-only admission policy the signer checks for at start.
			workloadAPISocket: agent.SocketPath(), extra: "podCertificates: {enabled: true, trustNonNodeRequesters: true}\n",
		}, o.timeout)
		res.registrarReady = ready
		return p, err
	}
	registrar, err := start()
	if err != nil {
		return err
	}
	logf("spire-registrar ready in %v; %d requests one at a time", res.registrarReady, n)
	w, err := newIssueWatch(ctx, admin)
	if err != nil {
		registrar.stop()
		return err
	}
	defer w.stop()
	request := func(i int) (string, error) {
		pcr, _, err := realcluster.RequestPodCertificate(ctx, nodeClient, pods[i%len(pods)], node,
			realcluster.PodCertificateRequestOptions{SignerName: config.DefaultPodCertificateSignerName})
		if err != nil {
			return "", err
		}
		return pcr.Name, nil
	}
	for i := range n {
		begin := time.Now()
		name, err := request(i)
		if err != nil {
			registrar.stop()
			return err
		}
		if err := w.wait(ctx, name, o.timeout); err != nil {
			registrar.stop()
			return err
		}
		res.latencies = append(res.latencies, time.Since(begin))
	}
	ps := percentiles(res.latencies, 50, 99)
	logf("latency p50 %v p99 %v; %d requests by %d workers at once", ps[0], ps[1], n, o.concurrency)

	begin := time.Now()
	names, err := createConcurrently(ctx, n, o.concurrency, request)
	if err == nil {
		for _, name := range names {
			if err = w.wait(ctx, name, o.timeout); err != nil {
				break
			}
		}
	}
	res.bulk = time.Since(begin)
	if serr := registrar.stop(); err == nil {
		err = serr
	}
	if err != nil {
		return err
	}
	logf("bulk: %d issued in %v (%.0f/s); the same creates with spire-registrar stopped", n, res.bulk, float64(n)/res.bulk.Seconds())
	begin = time.Now()
	if _, err := createConcurrently(ctx, n, o.concurrency, request); err != nil {
		return err
	}
	res.createsOnly = time.Since(begin)
	logf("creates alone: %v (%.0f/s)", res.createsOnly, float64(n)/res.createsOnly.Seconds())
	return writePodCertReport(outDir, res)
}

// podCertWorkload creates the node, namespace, service account, ClusterSPIFFEID and pods the
// requests are made for.
func podCertWorkload(ctx context.Context, admin kubernetes.Interface, spireAPI spireclientset.Interface) ([]*corev1.Pod, *corev1.Node, error) {
	node, err := realcluster.CreateNode(ctx, admin, podCertNode)
	if err != nil {
		return nil, nil, err
	}
	if err := realcluster.EnsureNamespace(ctx, admin, podCertNamespace); err != nil {
		return nil, nil, err
	}
	if _, err := realcluster.EnsureServiceAccount(ctx, admin, podCertNamespace, "workload"); err != nil {
		return nil, nil, err
	}
	if _, err := spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, &spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: podCertClass},
		Spec: spirev1alpha1.ClusterSPIFFEIDSpec{
			ClassName:        podCertClass,
			SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/sa/{{ .PodSpec.ServiceAccountName }}",
			PodSelector:      &metav1.LabelSelector{MatchLabels: map[string]string{"app": "podcert-bench"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		return nil, nil, err
	}
	volume := realcluster.WithPodCertificateVolume("svid", corev1.PodCertificateProjection{
		SignerName: config.DefaultPodCertificateSignerName, KeyType: realcluster.KeyTypeECDSAP256,
		MaxExpirationSeconds: ptr.To[int32](86400), CredentialBundlePath: "credentials.pem",
	})
	var pods []*corev1.Pod
	for i := range podCertPods {
		pod, err := realcluster.CreatePod(ctx, admin, podCertNamespace, fmt.Sprintf("workload-%d", i), node.Name, volume,
			func(p *corev1.Pod) {
				p.Labels = map[string]string{"app": "podcert-bench"}
				p.Spec.ServiceAccountName = "workload"
			})
		if err != nil {
			return nil, nil, err
		}
		pods = append(pods, pod)
	}
	return pods, node, nil
}

// createConcurrently calls create for 0..n-1 from workers goroutines and returns the names.
func createConcurrently(ctx context.Context, n, workers int, create func(int) (string, error)) ([]string, error) {
	names := make([]string, n)
	next := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				name, err := create(i)
				if err != nil {
					errs <- err
					return
				}
				names[i] = name
			}
		})
	}
	var err error
feed:
	for i := range n {
		select {
		case next <- i:
		case err = <-errs:
			break feed
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return names, err
}

// issueWatch sees requests issued through one watch of every request, so that a wait costs
// no polling.
type issueWatch struct {
	w      watch.Interface
	mu     sync.Mutex
	issued map[string]bool
	wake   chan struct{}
}

func newIssueWatch(ctx context.Context, admin kubernetes.Interface) (*issueWatch, error) {
	w, err := admin.CertificatesV1().PodCertificateRequests(podCertNamespace).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	iw := &issueWatch{w: w, issued: map[string]bool{}, wake: make(chan struct{})}
	go func() {
		for ev := range w.ResultChan() {
			pcr, ok := ev.Object.(*certificatesv1.PodCertificateRequest)
			if !ok || realcluster.PodCertificateRequestOutcome(pcr) == "" {
				continue
			}
			iw.mu.Lock()
			iw.issued[pcr.Name] = realcluster.PodCertificateRequestOutcome(pcr) == certificatesv1.PodCertificateRequestConditionTypeIssued
			close(iw.wake)
			iw.wake = make(chan struct{})
			iw.mu.Unlock()
		}
	}()
	return iw, nil
}

// wait returns once the request name has ended, with an error unless it was issued.
func (iw *issueWatch) wait(ctx context.Context, name string, timeout time.Duration) error {
	deadline := time.After(timeout)
	for {
		iw.mu.Lock()
		issued, ended := iw.issued[name]
		wake := iw.wake
		iw.mu.Unlock()
		if ended {
			if !issued {
				return fmt.Errorf("PodCertificateRequest %s ended without a certificate", name)
			}
			return nil
		}
		select {
		case <-wake:
		case <-deadline:
			return fmt.Errorf("PodCertificateRequest %s not issued after %v", name, timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (iw *issueWatch) stop() { iw.w.Stop() }

// writePodCertReport writes table.md into dir.
func writePodCertReport(dir string, r podCertResult) error {
	ps := percentiles(r.latencies, 50, 99)
	table := fmt.Sprintf(`| requests | p50 (ms) | p99 (ms) | issued/s (%d at once, %d workers) | creates/s, nobody signing |
|---:|---:|---:|---:|---:|
| %d | %.1f | %.1f | %.0f | %.0f |

- p50/p99: one request at a time, made as the node (system:node:%s), from just before the
  create call until a watch delivers it with its certificate chain.
- issued/s: %d requests created by %d concurrent callers, from the first create call until
  the last is issued; creates/s: the same creates with spire-registrar stopped, kube-apiserver's
  own ceiling for this work.
- spire-registrar was ready %v after it started.
`, r.requests, r.concurrency, r.requests, ms(ps[0]), ms(ps[1]), float64(r.requests)/r.bulk.Seconds(),
		float64(r.requests)/r.createsOnly.Seconds(), podCertNode, r.requests, r.concurrency, r.registrarReady.Round(time.Millisecond))
	fmt.Fprint(os.Stderr, table)
	return os.WriteFile(filepath.Join(dir, "table.md"), []byte(table), 0o644)
}
