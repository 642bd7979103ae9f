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

package podcertificates

import (
	"context"
	"crypto"
	"fmt"
	"log"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/podcert"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

const (
	trustDomain = realcluster.DefaultTrustDomain
	// registrarID is the SPIFFE ID of spire-registrar's own entry, admin and downstream.
	registrarID = "spiffe://" + trustDomain + "/spire-registrar"
	// signerName is the signer spire-registrar signs for when the config names none.
	signerName = "spire.spiffe.io/x509-svid"
	// bundleName is the ClusterTrustBundle spire-registrar publishes SPIRE's X.509 authorities
	// in: the signer name with ":" for "/", then ":" and the trust domain.
	bundleName = "spire.spiffe.io:x509-svid:" + trustDomain
	// controllerName labels the pod certificate controller's metrics.
	controllerName = "spire-registrar-pod-certificate-controller"
	// gcInterval is spire-registrar's resync interval: it checks its CA for renewal and
	// republishes SPIRE's authorities this often, so that the tests see both within seconds.
	gcInterval = 2 * time.Second
	// namespace holds the tests' pods; the light world has it, without a service account.
	namespace = metav1.NamespaceDefault
	nodeName  = "node-1"
)

// TestMain runs the mTLS peer when this binary was started as one (see peer_test.go), else
// the tests; it removes the spire-registrar binary they built.
func TestMain(m *testing.M) {
	if os.Getenv(peerEnv) != "" {
		os.Exit(runPeer())
	}
	code := m.Run()
	if err := realcluster.RemoveRegistrarBinary(); err != nil {
		log.Printf("remove the spire-registrar binary: %v", err)
	}
	os.Exit(code)
}

// worldOptions say how a world differs from the usual one.
type worldOptions struct {
	// spireCATTL is the SPIRE server's ca_ttl; 0 keeps SPIRE's 24h.
	spireCATTL time.Duration
	// notDownstream gives spire-registrar's entry admin only, without downstream.
	notDownstream bool
	// noNodeOnlyPolicy leaves out the admission policy of manifests/pod-certificates that lets
	// only a pod's node request its certificate.
	noNodeOnlyPolicy bool
	// trustNonNodeRequesters sets podCertificates.trustNonNodeRequesters.
	trustNonNodeRequesters bool
	// federatedSignerName is podCertificates.federatedSignerName; empty: none.
	federatedSignerName string
}

// world is a kube-apiserver that authorizes nodes as a cluster with kubelets does (Node
// authorizer, NodeRestriction) with our CRDs and the node-only admission policy of
// manifests/pod-certificates, a node object, a spire-server, a spire-agent
// attested to it with a join token, and spire-registrar's admin and downstream entry for its
// uid and binary, whose X509-SVID the agent holds. start runs the spire-registrar binary,
// which reaches the server over TCP with that X509-SVID and signs pod certificates.
type world struct {
	stack  *realcluster.Stack
	agent  *realcluster.Agent
	admin  kubernetes.Interface
	node   *corev1.Node
	asNode kubernetes.Interface // acts as system:node:<nodeName>, as its kubelet would
	bin    string
	uid    string
	opts   worldOptions
	// waitForIdentity and gcInterval are the config's for the next start: 2s and gcInterval
	// unless a test sets them.
	waitForIdentity, gcInterval time.Duration
	// federatedSignerName is the config's podCertificates.federatedSignerName.
	federatedSignerName string
}

func newWorld(t *testing.T, opts worldOptions) *world {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the real kube-apiserver, spire-server and spire-agent")
	}
	w := &world{bin: realcluster.RegistrarBinary(t), uid: strconv.Itoa(os.Getuid()), opts: opts, waitForIdentity: 2 * time.Second, gcInterval: gcInterval,
		federatedSignerName: opts.federatedSignerName}
	w.stack = realcluster.NewStackWith(t, realcluster.StackOptions{
		Kube: realcluster.KubeOptions{NodeAuthorization: true},
		// CA keys on disk, as a deployment keeps them: a server that is killed and restarted
		// comes back with its CA, which the agent already trusts.
		SPIRE: realcluster.SPIREOptions{CATTL: opts.spireCATTL, DiskKeyManager: true},
	})
	w.admin = w.stack.Client
	w.agent = realcluster.NewAgent(t, realcluster.AgentOptions{Server: w.stack.SPIRE, DiscoverWorkloadPath: true})

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	flags := []string{"-admin", "-downstream"}
	if opts.notDownstream {
		flags = flags[:1]
	}
	if _, err := w.agent.CreateWorkloadEntryCLI(ctx, registrarID, []string{"unix:uid:" + w.uid, "unix:path:" + w.bin}, flags...); err != nil {
		t.Fatal(err)
	}
	if err := w.agent.WaitForSVIDCached(ctx, registrarID); err != nil {
		t.Fatal(err)
	}
	var err error
	if w.node, err = realcluster.CreateNode(ctx, w.admin, nodeName); err != nil {
		t.Fatal(err)
	}
	if w.asNode, err = w.stack.Kube.NodeClient(nodeName); err != nil {
		t.Fatal(err)
	}
	if !opts.noNodeOnlyPolicy {
		applyNodeOnlyPolicy(t, w.admin)
	}
	return w
}

// config is spire-registrar's config file: the SPIRE server over TCP with the agent's
// X509-SVID, the pod certificate signer on, and a short gcInterval and waitForIdentity. The
// entry ID prefix keeps its resyncs from deleting the entries the tests create with the CLI.
func (w *world) config() string {
	federated := ""
	if w.federatedSignerName != "" {
		federated = "  federatedSignerName: " + w.federatedSignerName + "\n"
	}
	return fmt.Sprintf(`apiVersion: spire.spiffe.io/v1alpha1
kind: ControllerManagerConfig
trustDomain: %s
clusterName: it
clusterDomain: cluster.local
gcInterval: %s
entryIDPrefix: it
spireServerAddress: %s
workloadAPISocketPath: %s
podCertificates:
  enabled: true
  waitForIdentity: %s
`, trustDomain, w.gcInterval, w.stack.SPIRE.Address(), w.agent.SocketPath(), w.waitForIdentity) + federated + trustLine(w.opts.trustNonNodeRequesters)
}

// trustLine is the config line of podCertificates.trustNonNodeRequesters when trusted.
func trustLine(trusted bool) string {
	if !trusted {
		return ""
	}
	return "  trustNonNodeRequesters: true\n"
}

// start runs spire-registrar with the flags given besides its config; it stops when the
// test ends.
func (w *world) start(t *testing.T, flags ...string) *realcluster.Registrar {
	t.Helper()
	return realcluster.NewRegistrar(t, realcluster.RegistrarOptions{Binary: w.bin, Kubeconfig: w.stack.Kube.Kubeconfig(), Config: w.config(), Flags: flags})
}

// startReady runs spire-registrar and waits until it is ready: it holds a CA from SPIRE and
// has published the trust bundle.
func (w *world) startReady(t *testing.T) *realcluster.Registrar {
	t.Helper()
	r := w.start(t)
	r.WaitReady(t)
	return r
}

// podOptions say how a test pod differs from the usual one.
type podOptions struct {
	serviceAccount string // default "default"
	labels         map[string]string
	// projection changes the pod's podCertificate source.
	projection func(*corev1.PodCertificateProjection)
}

// createPod creates a pod bound to the world's node that mounts a podCertificate volume of
// the signer, as NodeRestriction requires before the node may request a certificate for it.
func (w *world) createPod(t *testing.T, name string, opts podOptions) *corev1.Pod {
	t.Helper()
	ctx := t.Context()
	sa := opts.serviceAccount
	if sa == "" {
		sa = "default"
	}
	if _, err := realcluster.EnsureServiceAccount(ctx, w.admin, namespace, sa); err != nil {
		t.Fatal(err)
	}
	proj := corev1.PodCertificateProjection{SignerName: signerName, KeyType: realcluster.KeyTypeECDSAP256, CredentialBundlePath: "credentialbundle.pem"}
	if opts.projection != nil {
		opts.projection(&proj)
	}
	pod, err := realcluster.CreatePod(ctx, w.admin, namespace, name, nodeName, realcluster.WithPodCertificateVolume("svid", proj), func(p *corev1.Pod) {
		p.Spec.ServiceAccountName = sa
		p.Labels = opts.labels
	})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// createClusterSPIFFEID creates a ClusterSPIFFEID.
func (w *world) createClusterSPIFFEID(t *testing.T, name string, spec spirev1alpha1.ClusterSPIFFEIDSpec) {
	t.Helper()
	if _, err := w.stack.SpireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(t.Context(), &spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// request makes, as the pod's node, the PodCertificateRequest its kubelet would make for the
// pod's volume, and returns it as created with the private key. Unless opts set them, the
// lifetime and user annotations are the volume's, as the kubelet copies them.
func (w *world) request(t *testing.T, pod *corev1.Pod, opts realcluster.PodCertificateRequestOptions) (*certificatesv1.PodCertificateRequest, crypto.Signer) {
	t.Helper()
	if opts.SignerName == "" {
		opts.SignerName = signerName
	}
	if opts.MaxExpirationSeconds == nil && opts.UnverifiedUserAnnotations == nil {
		for _, src := range podcert.PodCertificateSources(pod) {
			if src.SignerName == opts.SignerName {
				opts.MaxExpirationSeconds, opts.UnverifiedUserAnnotations = src.MaxExpirationSeconds, src.UserAnnotations
				break
			}
		}
	}
	pcr, key, err := realcluster.RequestPodCertificate(t.Context(), w.asNode, pod, w.node, opts)
	if err != nil {
		t.Fatal(err)
	}
	return pcr, key
}

// waitEnded waits until the request is issued, denied or failed.
func (w *world) waitEnded(t *testing.T, pcr *certificatesv1.PodCertificateRequest) *certificatesv1.PodCertificateRequest {
	t.Helper()
	got, err := realcluster.WaitPodCertificateIssued(t.Context(), w.admin, pcr.Namespace, pcr.Name)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// spireBundle is the server's X.509 trust bundle as `spire-server bundle show` prints it.
func (w *world) spireBundle(t *testing.T) *x509bundle.Bundle {
	t.Helper()
	pem, err := w.stack.SPIRE.CLI(t.Context(), "bundle show")
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := x509bundle.Parse(spiffeid.RequireTrustDomainFromString(trustDomain), pem)
	if err != nil {
		t.Fatal(err)
	}
	return bundle
}

// The series the tests read.
const (
	caRenewalsSuccess = `spire_registrar_pod_certificate_ca_renewals_total{result="success"}`
	caRenewalsError   = `spire_registrar_pod_certificate_ca_renewals_total{result="error"}`
	caExpiry          = `spire_registrar_pod_certificate_ca_expiry_timestamp_seconds`
	resyncFailures    = `spire_registrar_full_resyncs_total{controller="` + controllerName + `",result="failure"}`
)

// sample is one scrape and when it was taken.
type sample struct {
	at     time.Time
	series map[string]float64
}

// waitMetrics scrapes r's /metrics every 100ms until done holds for a scrape, and returns the
// last scrape before (zero when the first one held, or none answered) and the first that
// held: what done watches for happened between the two.
func waitMetrics(t *testing.T, r *realcluster.Registrar, timeout time.Duration, what string, done func(map[string]float64) bool) (before, after sample) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		at := time.Now()
		series, err := r.Scrape(ctx)
		if err != nil {
			return false, nil
		}
		s := sample{at: at, series: series}
		if done(series) {
			after = s
			return true, nil
		}
		before = s
		return false, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %s (last scrape %v): %v", what, timeout, before.series, err)
	}
	return before, after
}

// waitEntry waits until SPIRE holds (present) or no longer holds (!present) an entry with the
// SPIFFE ID of a pod's. spire-registrar's entry controller wrote or deleted it, so its
// informers, which the pod certificate controller shares, hold the pod as it is then and the
// ClusterSPIFFEIDs that select it. A test requests a certificate only then: a request decided
// on a cache that lags would be decided for the lag, and a denial is final.
func (w *world) waitEntry(t *testing.T, spiffeID string, present bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		entries, err := w.stack.SPIRE.EntryShow(ctx)
		if err != nil {
			return false, nil
		}
		return slices.ContainsFunc(entries, func(e realcluster.Entry) bool { return e.SPIFFEID == spiffeID }) == present, nil
	})
	if err != nil {
		t.Fatalf("SPIRE entry for %s present=%t: not within a minute: %v", spiffeID, present, err)
	}
}

// podIdentity is the ClusterSPIFFEID most tests declare: pods labelled app=<app> get the
// SPIFFE ID of their service account, DNS names of their own and of the service, and
// X509-SVIDs of 90 minutes.
func podIdentity(app string) spirev1alpha1.ClusterSPIFFEIDSpec {
	return spirev1alpha1.ClusterSPIFFEIDSpec{
		SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/sa/{{ .PodSpec.ServiceAccountName }}",
		PodSelector:      &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
		DNSNameTemplates: []string{"{{ .PodMeta.Name }}.{{ .PodMeta.Namespace }}.pod.{{ .ClusterDomain }}", app + ".{{ .PodMeta.Namespace }}.svc.{{ .ClusterDomain }}"},
		TTL:              metav1.Duration{Duration: 90 * time.Minute},
	}
}

// saID is the SPIFFE ID podIdentity gives the pods of a service account in namespace.
func saID(serviceAccount string) string {
	return "spiffe://" + trustDomain + "/ns/" + namespace + "/sa/" + serviceAccount
}
