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

package podcertificate

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ktypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	spirefake "github.com/spire-registrar/spire-registrar/generated/clientset/versioned/fake"
	spireinformers "github.com/spire-registrar/spire-registrar/generated/informers/externalversions"
	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/podcert"
	"github.com/spire-registrar/spire-registrar/pkg/render"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
	"github.com/spire-registrar/spire-registrar/pkg/spire/spiretest"
)

const (
	testSignerName = "spire.spiffe.io/x509-svid"
	// testSPIFFEIDTemplate renders spiffe://example.org/ns/<namespace>/sa/<service account>.
	testSPIFFEIDTemplate = "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/sa/{{ .PodSpec.ServiceAccountName }}"
)

var testTrustDomain = spiffeid.RequireTrustDomainFromString(spiretest.DefaultTrustDomain)

// testEnv is a Controller over fake clientsets whose informers are never started. Tests
// seed the informers' indexers (what the controller reads from its caches) and the fake
// clientset's tracker (what it reads live and writes) apart, so that an informer that lags
// behind the API server is one whose indexer holds another object than the tracker.
type testEnv struct {
	ctx   context.Context
	c     *Controller
	spire *spiretest.Server
	// authority is the controller's client of the SPIRE fake.
	authority *spire.AuthorityClient
	kube      *k8sfake.Clientset
	// spireAPI holds the ClusterSPIFFEIDs the API server has.
	spireAPI *spirefake.Clientset

	requests, bundles, pods, namespaces, nodes, slices, clusterSPIFFEIDs cache.Indexer
	// requestInformer and bundleInformer are the informers whose handlers the controller
	// registered; a test that wants their events runs them.
	requestInformer, bundleInformer cache.SharedIndexInformer
}

// envOptions change how newTestEnv builds the controller.
type envOptions struct {
	// options adjusts the controller's Options.
	options func(*Options)
	// noStart leaves the controller without its first CA: Start is not called.
	noStart bool
	// beforeStart runs before Start, to set the SPIRE fake up (a CA TTL, faults).
	beforeStart func(*spiretest.Server)
}

// newTestEnv builds the controller over the SPIRE fake and gets its first CA (Start), as
// the binary does before it runs the controller. Nothing runs: tests call syncRequest,
// resync and syncBundle themselves.
func newTestEnv(t *testing.T, o envOptions) *testEnv {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)

	env := &testEnv{ctx: ctx, spire: spiretest.New(t), kube: k8sfake.NewClientset()}
	client, err := spire.Dial(ctx, env.spire.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	env.authority = client.Authority()

	opts := Options{
		SignerName: testSignerName,
		Settings: render.Settings{
			TrustDomain:      testTrustDomain,
			ClusterName:      "demo",
			ClusterDomain:    "cluster.local",
			ParentIDTemplate: "spiffe://{{ .TrustDomain }}/k8s-node/{{ .NodeMeta.Name }}",
		},
		ResyncInterval: time.Minute,
	}
	if o.options != nil {
		o.options(&opts)
	}
	kubeInformers := informers.NewSharedInformerFactory(env.kube, 0)
	env.spireAPI = spirefake.NewSimpleClientset()
	spireInformers := spireinformers.NewSharedInformerFactory(env.spireAPI, 0)
	certs, core := kubeInformers.Certificates().V1(), kubeInformers.Core().V1()
	env.c, err = NewController(ctx,
		certs.PodCertificateRequests(), certs.ClusterTrustBundles(),
		core.Pods(), core.Namespaces(), core.Nodes(), kubeInformers.Discovery().V1().EndpointSlices(),
		spireInformers.Spire().V1alpha1().ClusterSPIFFEIDs(),
		env.kube, env.authority, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.c.queue.ShutDown(); env.c.bundleQueue.ShutDown() })
	env.requestInformer = certs.PodCertificateRequests().Informer()
	env.bundleInformer = certs.ClusterTrustBundles().Informer()
	env.requests = certs.PodCertificateRequests().Informer().GetIndexer()
	env.bundles = certs.ClusterTrustBundles().Informer().GetIndexer()
	env.pods = core.Pods().Informer().GetIndexer()
	env.namespaces = core.Namespaces().Informer().GetIndexer()
	env.nodes = core.Nodes().Informer().GetIndexer()
	env.slices = kubeInformers.Discovery().V1().EndpointSlices().Informer().GetIndexer()
	env.clusterSPIFFEIDs = spireInformers.Spire().V1alpha1().ClusterSPIFFEIDs().Informer().GetIndexer()

	if o.beforeStart != nil {
		o.beforeStart(env.spire)
	}
	if !o.noStart {
		if err := env.c.Start(ctx); err != nil {
			t.Fatalf("Start: %v", err)
		}
	}
	return env
}

// add puts objects in the API server and in the informers' caches, as they are once the
// informers have caught up.
func (env *testEnv) add(t *testing.T, objs ...runtime.Object) {
	t.Helper()
	env.addToAPI(t, objs...)
	env.addToCache(t, objs...)
}

// addToAPI puts objects in the API server only: the informers have not seen them yet. A pod
// comes with its service account, as kube-apiserver admits pods (UID "uid-sa-<name>"). A
// request comes from the pod's kubelet: unless the API server's pod already mounts
// podCertificate volumes, it gets the one the request was made for.
func (env *testEnv) addToAPI(t *testing.T, objs ...runtime.Object) {
	t.Helper()
	for _, obj := range objs {
		tracker := env.kube.Tracker()
		switch o := obj.(type) {
		case *spirev1alpha1.ClusterSPIFFEID:
			tracker = env.spireAPI.Tracker()
		case *corev1.Pod:
			env.addServiceAccount(t, o.Namespace, o.Spec.ServiceAccountName)
		case *certificatesv1.PodCertificateRequest:
			env.mountFor(t, o)
		}
		if err := tracker.Add(obj.DeepCopyObject()); err != nil {
			t.Fatalf("adding %T to the API: %v", obj, err)
		}
	}
}

// addServiceAccount puts a service account in the API server unless it is there.
func (env *testEnv) addServiceAccount(t *testing.T, namespace, name string) {
	t.Helper()
	if _, err := env.kube.Tracker().Get(corev1.SchemeGroupVersion.WithResource("serviceaccounts"), namespace, name); err == nil {
		return
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: ktypes.UID("uid-sa-" + name)}}
	if err := env.kube.Tracker().Add(sa); err != nil {
		t.Fatalf("adding service account %s/%s to the API: %v", namespace, name, err)
	}
}

// mountFor gives the API server's pod of req the podCertificate volume its kubelet made req
// for, unless the test gave it podCertificate volumes of its own.
func (env *testEnv) mountFor(t *testing.T, req *certificatesv1.PodCertificateRequest) {
	t.Helper()
	gvr := corev1.SchemeGroupVersion.WithResource("pods")
	obj, err := env.kube.Tracker().Get(gvr, req.Namespace, req.Spec.PodName)
	if err != nil {
		return
	}
	pod := obj.(*corev1.Pod).DeepCopy()
	if len(podcert.PodCertificateSources(pod)) > 0 {
		return
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, podCertificateVolume(corev1.PodCertificateProjection{SignerName: req.Spec.SignerName,
		MaxExpirationSeconds: req.Spec.MaxExpirationSeconds, UserAnnotations: req.Spec.UnverifiedUserAnnotations}))
	if err := env.kube.Tracker().Update(gvr, pod, req.Namespace); err != nil {
		t.Fatalf("mounting a podCertificate volume in pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
}

// podCertificateVolume is a projected volume with one podCertificate source.
func podCertificateVolume(src corev1.PodCertificateProjection) corev1.Volume {
	return corev1.Volume{Name: fmt.Sprintf("pod-certificate-%d", time.Now().UnixNano()), VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{PodCertificate: &src}}},
	}}
}

// addToCache puts objects in the informers' caches only, replacing what they held under the
// same key.
func (env *testEnv) addToCache(t *testing.T, objs ...runtime.Object) {
	t.Helper()
	for _, obj := range objs {
		var indexer cache.Indexer
		switch obj.(type) {
		case *certificatesv1.PodCertificateRequest:
			indexer = env.requests
		case *certificatesv1.ClusterTrustBundle:
			indexer = env.bundles
		case *corev1.Pod:
			indexer = env.pods
		case *corev1.Namespace:
			indexer = env.namespaces
		case *corev1.Node:
			indexer = env.nodes
		case *discoveryv1.EndpointSlice:
			indexer = env.slices
		case *spirev1alpha1.ClusterSPIFFEID:
			indexer = env.clusterSPIFFEIDs
		default:
			t.Fatalf("no informer caches %T", obj)
		}
		if err := indexer.Update(obj.DeepCopyObject()); err != nil {
			t.Fatalf("adding %T to the cache: %v", obj, err)
		}
	}
}

// informBundles makes the bundle informer's cache hold what the API server holds, as it
// does once it has caught up with the controller's writes.
func (env *testEnv) informBundles(t *testing.T) {
	t.Helper()
	list, err := env.kube.CertificatesV1().ClusterTrustBundles().List(env.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	objs := make([]any, 0, len(list.Items))
	for i := range list.Items {
		objs = append(objs, &list.Items[i])
	}
	if err := env.bundles.Replace(objs, list.ResourceVersion); err != nil {
		t.Fatal(err)
	}
}

// sync syncs a request's key, as a worker does.
func (env *testEnv) sync(req *certificatesv1.PodCertificateRequest) error {
	return env.c.syncRequest(env.ctx, req.Namespace+"/"+req.Name)
}

// request returns a request as the API server holds it.
func (env *testEnv) request(t *testing.T, req *certificatesv1.PodCertificateRequest) *certificatesv1.PodCertificateRequest {
	t.Helper()
	got, err := env.kube.CertificatesV1().PodCertificateRequests(req.Namespace).Get(env.ctx, req.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// writes are the fake clientset's write actions so far, each as "verb resource[/subresource]
// name", name being namespace/name for a namespaced object.
func (env *testEnv) writes() []string {
	var out []string
	for _, a := range env.kube.Actions() {
		what := a.GetVerb() + " " + a.GetResource().Resource
		if a.GetSubresource() != "" {
			what += "/" + a.GetSubresource()
		}
		switch a := a.(type) {
		case clienttesting.DeleteAction:
			what += " " + a.GetName()
		case clienttesting.PatchAction:
			what += " " + a.GetName()
		case interface{ GetObject() runtime.Object }:
			key, _ := cache.MetaNamespaceKeyFunc(a.GetObject())
			what += " " + key
		default: // get, list, watch
			continue
		}
		out = append(out, what)
	}
	return out
}

// caNotAfter is when the controller's current CA expires; the test fails when it has none.
func (env *testEnv) caNotAfter(t *testing.T) time.Time {
	t.Helper()
	env.c.ca.mu.RLock()
	defer env.c.ca.mu.RUnlock()
	if env.c.ca.ca == nil {
		t.Fatal("the controller holds no CA")
	}
	return env.c.ca.ca.NotAfter()
}

// currentCA is the controller's CA, nil when it has none.
func (env *testEnv) currentCA() *spire.DownstreamCA {
	env.c.ca.mu.RLock()
	defer env.c.ca.mu.RUnlock()
	return env.c.ca.ca
}

func namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, UID: ktypes.UID("uid-ns-" + name), Labels: labels}}
}

func node(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: ktypes.UID("uid-node-" + name)}}
}

// pod is a running pod on nodeName whose service account is its name with "-sa".
func pod(ns, name, nodeName string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: ktypes.UID("uid-pod-" + ns + "-" + name), Labels: labels},
		Spec:       corev1.PodSpec{NodeName: nodeName, ServiceAccountName: name + "-sa"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// clusterSPIFFEID is a ClusterSPIFFEID created age ago.
func clusterSPIFFEID(name string, age time.Duration, spec spirev1alpha1.ClusterSPIFFEIDSpec) *spirev1alpha1.ClusterSPIFFEID {
	if spec.SPIFFEIDTemplate == "" {
		spec.SPIFFEIDTemplate = testSPIFFEIDTemplate
	}
	return &spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: ktypes.UID("uid-csid-" + name), Generation: 1,
			CreationTimestamp: metav1.NewTime(time.Now().Add(-age))},
		Spec: spec,
	}
}

func selector(labels map[string]string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: labels}
}

// cluster is the usual world of a test: pod prod/web (app=web) on node-1, in namespace prod
// (env=prod), and the ClusterSPIFFEID web-identity that selects it with a DNS name template.
type cluster struct {
	ns   *corev1.Namespace
	node *corev1.Node
	pod  *corev1.Pod
	csid *spirev1alpha1.ClusterSPIFFEID
}

func newCluster() cluster {
	return cluster{
		ns:   namespace("prod", map[string]string{"env": "prod"}),
		node: node("node-1"),
		pod:  pod("prod", "web", "node-1", map[string]string{"app": "web"}),
		csid: clusterSPIFFEID("web-identity", time.Hour, spirev1alpha1.ClusterSPIFFEIDSpec{
			PodSelector:      selector(map[string]string{"app": "web"}),
			DNSNameTemplates: []string{"{{ .PodMeta.Name }}.{{ .PodMeta.Namespace }}.svc"},
		}),
	}
}

func (cl cluster) objects() []runtime.Object {
	return []runtime.Object{cl.ns, cl.node, cl.pod, cl.csid}
}

// newP256Key is a fresh key of the type kubelet uses by default.
func newP256Key(t *testing.T) crypto.Signer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// kubeletRequest is the request kubelet makes for a pod's podCertificate volume: a stub CSR
// of key, and the pod's, its node's and its service account's names and UIDs, created now.
func kubeletRequest(t *testing.T, p *corev1.Pod, n *corev1.Node, key crypto.Signer) *certificatesv1.PodCertificateRequest {
	t.Helper()
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		t.Fatal(err)
	}
	return &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: p.Namespace, Name: fmt.Sprintf("%s-req-%d", p.Name, time.Now().UnixNano()),
			UID: ktypes.UID("uid-pcr-" + p.Name), Generation: 1, CreationTimestamp: metav1.Now(),
		},
		Spec: certificatesv1.PodCertificateRequestSpec{
			SignerName:           testSignerName,
			PodName:              p.Name,
			PodUID:               p.UID,
			ServiceAccountName:   p.Spec.ServiceAccountName,
			ServiceAccountUID:    ktypes.UID("uid-sa-" + p.Spec.ServiceAccountName),
			NodeName:             ktypes.NodeName(n.Name),
			NodeUID:              n.UID,
			MaxExpirationSeconds: ptr.To[int32](86400),
			StubPKCS10Request:    csr,
		},
	}
}

// condition returns the request's only condition; the test fails unless it has exactly one.
func condition(t *testing.T, req *certificatesv1.PodCertificateRequest) metav1.Condition {
	t.Helper()
	if len(req.Status.Conditions) != 1 {
		t.Fatalf("request has conditions %+v, want exactly one", req.Status.Conditions)
	}
	return req.Status.Conditions[0]
}

// parseChain parses a PEM certificate chain.
func parseChain(t *testing.T, chain string) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	rest := []byte(chain)
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			t.Fatalf("chain has a %s block", block.Type)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, cert)
	}
	if strings.TrimSpace(string(rest)) != "" {
		t.Fatalf("chain has trailing data %q", rest)
	}
	return out
}
