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
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// The flood bench's shape: N requests (-n, default 1000) for pods of one namespace that no
// ClusterSPIFFEID selects, and podCertFloodGood requests for pods another namespace's
// ClusterSPIFFEID selects, made once podCertFloodHead of the flood are in.
const (
	podCertFloodNamespace = "podcert-flood"
	podCertFloodGood      = 100
	podCertFloodHead      = 100
	podCertFloodGoodCalls = 8
)

// runPodCertFloodBench is -mode podcert-flood: in the podcert bench's world, one namespace
// floods the signer with requests that will be denied while another makes requests that
// will be issued. It reports how long the good ones took to be issued (from the first one's
// create call to the last one's chain, and each one's create → issued), how long the flood
// took to be denied, and the calls kube-apiserver served meanwhile, by verb and resource,
// from its own apiserver_request_total.
func runPodCertFloodBench(ctx context.Context, o options) error {
	wld, err := startPodCertWorld(ctx, o, "podcert-flood")
	if err != nil {
		return err
	}
	defer wld.stop()
	n, logf, outDir, kube, spireServer, agent, bin, admin := wld.n, wld.logf, wld.outDir, wld.kube, wld.spire, wld.agent, wld.bin, wld.admin
	good, node, nodeClient := wld.pods, wld.node, wld.nodeClient
	flood, err := podCertFloodPods(ctx, admin, node)
	if err != nil {
		return err
	}

	// Only the node makes requests here, but the bench's kube-apiserver has not the node-only
	// admission policy the signer checks for at start.
	extra := "podCertificates: {enabled: true, trustNonNodeRequesters: true}\n"
	if o.waitForIdentity >= 0 {
		extra = fmt.Sprintf("podCertificates: {enabled: true, trustNonNodeRequesters: true, waitForIdentity: %s}\n", o.waitForIdentity)
	}
	registrar, ready, err := startRegistrar(ctx, bin, outDir, "spire-registrar", registrarConfig{
		className: podCertClass, spire: spireServer, kubeconfig: kube.Kubeconfig(), workers: o.workers,
		workloadAPISocket: agent.SocketPath(), extra: extra,
	}, o.timeout)
	if err != nil {
		return err
	}
	defer registrar.stop()
	logf("spire-registrar ready in %v (%s); %d flood requests, then %d good ones", ready, strings.TrimSpace(extra), n, podCertFloodGood)

	w, err := newEndWatch(ctx, admin)
	if err != nil {
		return err
	}
	defer w.stop()
	before, err := apiserverCalls(ctx, admin)
	if err != nil {
		return err
	}
	request := func(pods []*corev1.Pod) func(int) (string, error) {
		return func(i int) (string, error) {
			pcr, _, err := realcluster.RequestPodCertificate(ctx, nodeClient, pods[i%len(pods)], node,
				realcluster.PodCertificateRequestOptions{SignerName: config.DefaultPodCertificateSignerName})
			if err != nil {
				return "", err
			}
			return pcr.Namespace + "/" + pcr.Name, nil
		}
	}

	begin := time.Now()
	head := make(chan struct{})
	var headOnce sync.Once
	var floodNames []string
	floodErr := make(chan error, 1)
	var created sync.WaitGroup
	created.Add(1)
	go func() {
		defer created.Done()
		var count sync.Mutex
		made := 0
		floodCreate := request(flood)
		names, err := createConcurrently(ctx, n, o.concurrency, func(i int) (string, error) {
			name, err := floodCreate(i)
			count.Lock()
			if made++; made == podCertFloodHead {
				headOnce.Do(func() { close(head) })
			}
			count.Unlock()
			return name, err
		})
		headOnce.Do(func() { close(head) })
		floodNames = names
		floodErr <- err
	}()
	<-head
	goodBegin := time.Now()
	goodCreate := request(good)
	var mu sync.Mutex
	startedAt := map[string]time.Time{}
	goodNames, err := createConcurrently(ctx, podCertFloodGood, podCertFloodGoodCalls, func(i int) (string, error) {
		at := time.Now()
		name, err := goodCreate(i)
		mu.Lock()
		startedAt[name] = at
		mu.Unlock()
		return name, err
	})
	if err != nil {
		return err
	}
	var latencies []time.Duration
	var goodDone time.Time
	for _, name := range goodNames {
		end, err := w.wait(ctx, name, o.timeout)
		if err != nil {
			return err
		}
		if end.outcome != certificatesv1.PodCertificateRequestConditionTypeIssued {
			return fmt.Errorf("good request %s %s", name, end.outcome)
		}
		latencies = append(latencies, end.at.Sub(startedAt[name]))
		if end.at.After(goodDone) {
			goodDone = end.at
		}
	}
	created.Wait()
	if err := <-floodErr; err != nil {
		return err
	}
	atGood, err := apiserverCalls(ctx, admin)
	if err != nil {
		return err
	}
	res := floodResult{flood: n, config: strings.TrimSpace(extra), goodSpan: goodDone.Sub(goodBegin), goodLatencies: latencies,
		floodCreates: len(floodNames), callsAtGood: atGood.minus(before), floodEndedAtGood: w.ended(floodNames)}
	logf("good: %d issued %v after the first good create; %d of the flood ended by then", podCertFloodGood, res.goodSpan, res.floodEndedAtGood)

	// The flood ends: at once without a wait for identity, else once the wait runs out.
	var floodDone time.Time
	for _, name := range floodNames {
		end, err := w.wait(ctx, name, o.timeout)
		if err != nil {
			return err
		}
		if end.outcome != certificatesv1.PodCertificateRequestConditionTypeDenied {
			return fmt.Errorf("flood request %s %s, want Denied", name, end.outcome)
		}
		if end.at.After(floodDone) {
			floodDone = end.at
		}
	}
	after, err := apiserverCalls(ctx, admin)
	if err != nil {
		return err
	}
	res.floodSpan, res.callsAtEnd = floodDone.Sub(begin), after.minus(before)
	logf("flood: %d denied %v after the first flood create", n, res.floodSpan)
	return writeFloodReport(outDir, res)
}

// podCertFloodPods creates the flood namespace's pods: they mount the signer's volume, as the
// node's requests must, and no ClusterSPIFFEID selects them.
func podCertFloodPods(ctx context.Context, admin kubernetes.Interface, node *corev1.Node) ([]*corev1.Pod, error) {
	if err := realcluster.EnsureNamespace(ctx, admin, podCertFloodNamespace); err != nil {
		return nil, err
	}
	if _, err := realcluster.EnsureServiceAccount(ctx, admin, podCertFloodNamespace, "workload"); err != nil {
		return nil, err
	}
	volume := realcluster.WithPodCertificateVolume("svid", corev1.PodCertificateProjection{
		SignerName: config.DefaultPodCertificateSignerName, KeyType: realcluster.KeyTypeECDSAP256,
		MaxExpirationSeconds: ptr.To[int32](86400), CredentialBundlePath: "credentials.pem",
	})
	var pods []*corev1.Pod
	for i := range podCertPods {
		pod, err := realcluster.CreatePod(ctx, admin, podCertFloodNamespace, fmt.Sprintf("nobody-%d", i), node.Name, volume,
			func(p *corev1.Pod) { p.Spec.ServiceAccountName = "workload" })
		if err != nil {
			return nil, err
		}
		pods = append(pods, pod)
	}
	return pods, nil
}

// requestEnd is when and how a request ended, as the watch saw it.
type requestEnd struct {
	outcome string
	at      time.Time
}

// endWatch records, through one watch of every namespace's requests, when each ended.
type endWatch struct {
	stopWatch func()
	mu        sync.Mutex
	ends      map[string]requestEnd
	wake      chan struct{}
}

func newEndWatch(ctx context.Context, admin kubernetes.Interface) (*endWatch, error) {
	w, err := admin.CertificatesV1().PodCertificateRequests(metav1.NamespaceAll).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	ew := &endWatch{stopWatch: w.Stop, ends: map[string]requestEnd{}, wake: make(chan struct{})}
	go func() {
		for ev := range w.ResultChan() {
			pcr, ok := ev.Object.(*certificatesv1.PodCertificateRequest)
			if !ok {
				continue
			}
			outcome := realcluster.PodCertificateRequestOutcome(pcr)
			if outcome == "" {
				continue
			}
			now := time.Now()
			ew.mu.Lock()
			if _, seen := ew.ends[pcr.Namespace+"/"+pcr.Name]; !seen {
				ew.ends[pcr.Namespace+"/"+pcr.Name] = requestEnd{outcome: outcome, at: now}
			}
			close(ew.wake)
			ew.wake = make(chan struct{})
			ew.mu.Unlock()
		}
	}()
	return ew, nil
}

// wait returns how the request key (namespace/name) ended, once it has.
func (ew *endWatch) wait(ctx context.Context, key string, timeout time.Duration) (requestEnd, error) {
	deadline := time.After(timeout)
	for {
		ew.mu.Lock()
		end, ok := ew.ends[key]
		wake := ew.wake
		ew.mu.Unlock()
		if ok {
			return end, nil
		}
		select {
		case <-wake:
		case <-deadline:
			return requestEnd{}, fmt.Errorf("PodCertificateRequest %s did not end within %v", key, timeout)
		case <-ctx.Done():
			return requestEnd{}, ctx.Err()
		}
	}
}

// ended is how many of keys have ended.
func (ew *endWatch) ended(keys []string) int {
	ew.mu.Lock()
	defer ew.mu.Unlock()
	n := 0
	for _, k := range keys {
		if _, ok := ew.ends[k]; ok {
			n++
		}
	}
	return n
}

func (ew *endWatch) stop() { ew.stopWatch() }

// callCounts are kube-apiserver's apiserver_request_total, summed by "VERB resource[/subresource]".
type callCounts map[string]float64

var requestTotal = regexp.MustCompile(`^apiserver_request_total\{(.*)\} (\S+)$`)
var label = regexp.MustCompile(`(\w+)="([^"]*)"`)

// apiserverCalls reads kube-apiserver's request counters from its /metrics.
func apiserverCalls(ctx context.Context, admin kubernetes.Interface) (callCounts, error) {
	body, err := admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading kube-apiserver's metrics: %w", err)
	}
	out := callCounts{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := requestTotal.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		labels := map[string]string{}
		for _, l := range label.FindAllStringSubmatch(m[1], -1) {
			labels[l[1]] = l[2]
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			continue
		}
		key := labels["verb"] + " " + labels["resource"]
		if labels["subresource"] != "" {
			key += "/" + labels["subresource"]
		}
		out[key] += v
	}
	return out, sc.Err()
}

// minus is the calls made since before.
func (c callCounts) minus(before callCounts) callCounts {
	out := callCounts{}
	for k, v := range c {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// floodResult is what -mode podcert-flood measured.
type floodResult struct {
	flood, floodCreates int
	config              string
	goodSpan, floodSpan time.Duration
	goodLatencies       []time.Duration
	floodEndedAtGood    int
	callsAtGood         callCounts
	callsAtEnd          callCounts
}

// writeFloodReport writes table.md into dir.
func writeFloodReport(dir string, r floodResult) error {
	ps := percentiles(r.goodLatencies, 50, 99, 100)
	var b strings.Builder
	fmt.Fprintf(&b, "config: `%s`\n\n", r.config)
	fmt.Fprintf(&b, "| flood | good | good all issued (s) | good p50 / p99 / max (ms) | flood ended when good done | flood all denied (s) |\n|---:|---:|---:|---:|---:|---:|\n")
	fmt.Fprintf(&b, "| %d | %d | %.2f | %.0f / %.0f / %.0f | %d | %.2f |\n\n", r.flood, podCertFloodGood, r.goodSpan.Seconds(),
		ms(ps[0]), ms(ps[1]), ms(ps[2]), r.floodEndedAtGood, r.floodSpan.Seconds())
	fmt.Fprintf(&b, "kube-apiserver calls (apiserver_request_total), until the good ones were issued | until the flood was denied; the bench's own %d creates (POST podcertificaterequests) included:\n\n", r.flood+podCertFloodGood)
	fmt.Fprintf(&b, "| call | until good issued | until flood denied |\n|---|---:|---:|\n")
	keys := make([]string, 0, len(r.callsAtEnd))
	for k := range r.callsAtEnd {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var totalGood, totalEnd float64
	for _, k := range keys {
		fmt.Fprintf(&b, "| %s | %.0f | %.0f |\n", k, r.callsAtGood[k], r.callsAtEnd[k])
		totalGood += r.callsAtGood[k]
		totalEnd += r.callsAtEnd[k]
	}
	fmt.Fprintf(&b, "| all | %.0f | %.0f |\n", totalGood, totalEnd)
	fmt.Fprint(os.Stderr, b.String())
	return os.WriteFile(filepath.Join(dir, "table.md"), []byte(b.String()), 0o644)
}
