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
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ktypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/controller/runner"
	"github.com/spire-registrar/spire-registrar/pkg/informercache"
	"github.com/spire-registrar/spire-registrar/pkg/podcert"
	"github.com/spire-registrar/spire-registrar/pkg/spire/spiretest"
)

// checkIssued checks that the API server holds req as issued for key with the SPIFFE ID and
// DNS names given, by kube-apiserver's rules for an issued status
// (ValidatePodCertificateRequestStatusUpdate) and by go-spiffe's X509-SVID verification
// against the SPIRE fake's authorities. It returns the status and the leaf.
func checkIssued(t *testing.T, env *testEnv, req *certificatesv1.PodCertificateRequest, key crypto.Signer, wantID string, wantDNS []string) (certificatesv1.PodCertificateRequestStatus, *x509.Certificate) {
	t.Helper()
	got := env.request(t, req)
	st := got.Status
	cond := condition(t, got)
	if cond.Type != certificatesv1.PodCertificateRequestConditionTypeIssued || cond.Status != metav1.ConditionTrue ||
		cond.Reason == "" || cond.ObservedGeneration != req.Generation || cond.LastTransitionTime.IsZero() {
		t.Fatalf("condition = %+v, want Issued=True with a reason, a transition time and observedGeneration %d", cond, req.Generation)
	}
	chain := parseChain(t, st.CertificateChain)
	if len(chain) < 2 {
		t.Fatalf("chain has %d certificates, want the leaf and the CA", len(chain))
	}
	leaf := chain[0]
	if pub, ok := leaf.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(key.Public()) {
		t.Error("the leaf is not for the stub CSR's key")
	}
	if st.NotBefore == nil || st.NotAfter == nil || st.BeginRefreshAt == nil {
		t.Fatalf("status times notBefore %v, notAfter %v, beginRefreshAt %v: all are required", st.NotBefore, st.NotAfter, st.BeginRefreshAt)
	}
	if !st.NotBefore.Time.Equal(leaf.NotBefore) || !st.NotAfter.Time.Equal(leaf.NotAfter) {
		t.Errorf("status validity [%v, %v], the leaf's [%v, %v]: they must be equal", st.NotBefore, st.NotAfter, leaf.NotBefore, leaf.NotAfter)
	}
	if d := time.Since(st.NotBefore.Time); d < -5*time.Minute || d > 5*time.Minute {
		t.Errorf("notBefore is %v from now, more than the 5 minutes kube-apiserver allows", d)
	}
	lifetime := leaf.NotAfter.Sub(leaf.NotBefore)
	if lifetime < time.Hour || lifetime > time.Duration(*req.Spec.MaxExpirationSeconds)*time.Second {
		t.Errorf("lifetime %v, want within [1h, maxExpirationSeconds %ds]", lifetime, *req.Spec.MaxExpirationSeconds)
	}
	if st.BeginRefreshAt.Time.Before(st.NotBefore.Add(10*time.Minute)) || st.BeginRefreshAt.Time.After(st.NotAfter.Add(-10*time.Minute)) {
		t.Errorf("beginRefreshAt %v, want at least 10 minutes from notBefore %v and notAfter %v", st.BeginRefreshAt, st.NotBefore, st.NotAfter)
	}
	id, _, err := x509svid.Verify(chain, x509bundle.FromX509Authorities(testTrustDomain, env.spire.X509Authorities()))
	if err != nil {
		t.Fatalf("the chain does not verify as an X509-SVID of the SPIRE fake's trust domain: %v", err)
	}
	if id.String() != wantID {
		t.Errorf("SPIFFE ID %s, want %s", id, wantID)
	}
	if diff := cmp.Diff(wantDNS, leaf.DNSNames); diff != "" {
		t.Errorf("DNS names (-want +got):\n%s", diff)
	}
	return st, leaf
}

// TestSyncRequestIssues: a request kubelet makes for a pod a ClusterSPIFFEID selects is
// issued the X509-SVID that ClusterSPIFFEID renders, valid for the shortest of
// spec.maxExpirationSeconds, the ClusterSPIFFEID's ttl (at least an hour) and the CA's
// remaining life.
func TestSyncRequestIssues(t *testing.T) {
	const wantID = "spiffe://example.org/ns/prod/sa/web-sa"
	wantDNS := []string{"web.prod.svc"}
	for _, tc := range []struct {
		name                 string
		caTTL                time.Duration // the SPIRE fake's CA TTL; 0: its default, a day
		maxExpirationSeconds int32
		ttl                  time.Duration // the ClusterSPIFFEID's
		defaultTTL, maxTTL   time.Duration // podCertificates.defaultTTL and maxTTL
		// wantLifetime is the leaf's; 0 means until the CA expires.
		wantLifetime time.Duration
	}{
		{name: "maxExpirationSeconds is the shortest", maxExpirationSeconds: 2 * 3600, ttl: 3 * time.Hour, wantLifetime: 2 * time.Hour},
		{name: "no ttl: SPIRE's default X509-SVID TTL, not the request's day", maxExpirationSeconds: 86400, wantLifetime: time.Hour},
		{name: "no ttl: the configured default", maxExpirationSeconds: 86400, defaultTTL: 5 * time.Hour, wantLifetime: 5 * time.Hour},
		{name: "the ttl capped by maxTTL", maxExpirationSeconds: 86400, ttl: 12 * time.Hour, maxTTL: 2 * time.Hour, wantLifetime: 2 * time.Hour},
		{name: "maxExpirationSeconds under the default", maxExpirationSeconds: 3600, defaultTTL: 5 * time.Hour, wantLifetime: time.Hour},
		{name: "the ClusterSPIFFEID's ttl is the shortest", maxExpirationSeconds: 86400, ttl: 3 * time.Hour, wantLifetime: 3 * time.Hour},
		{name: "a ttl under an hour is raised to an hour", maxExpirationSeconds: 86400, ttl: 10 * time.Minute, wantLifetime: time.Hour},
		{name: "the CA's remaining life is the shortest", caTTL: 5 * time.Hour, maxExpirationSeconds: 86400, ttl: 6 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, envOptions{beforeStart: func(s *spiretest.Server) { s.SetCATTL(tc.caTTL) },
				options: func(o *Options) { o.DefaultTTL, o.MaxTTL = tc.defaultTTL, tc.maxTTL }})
			cl := newCluster()
			cl.csid.Spec.TTL = metav1.Duration{Duration: tc.ttl}
			env.add(t, cl.objects()...)
			key := newP256Key(t)
			req := kubeletRequest(t, cl.pod, cl.node, key)
			req.Spec.MaxExpirationSeconds = ptr.To(tc.maxExpirationSeconds)
			env.add(t, req)

			if err := env.sync(req); err != nil {
				t.Fatalf("syncRequest: %v", err)
			}
			_, leaf := checkIssued(t, env, req, key, wantID, wantDNS)
			if tc.wantLifetime == 0 {
				if caNotAfter := env.caNotAfter(t); !leaf.NotAfter.Equal(caNotAfter) {
					t.Errorf("leaf expires at %v, want the CA's expiry %v", leaf.NotAfter, caNotAfter)
				}
			} else if got := leaf.NotAfter.Sub(leaf.NotBefore); got != tc.wantLifetime {
				t.Errorf("lifetime %v, want %v", got, tc.wantLifetime)
			}
			if diff := cmp.Diff([]string{"update podcertificaterequests/status " + req.Namespace + "/" + req.Name}, env.writes()); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSyncRequestChoosesClusterSPIFFEID: of two ClusterSPIFFEIDs that select the pod, the
// annotation spire.spiffe.io/clusterspiffeid picks one; without it the preferred (older)
// one gives the identity, as it gives the pod's entry.
func TestSyncRequestChoosesClusterSPIFFEID(t *testing.T) {
	selectWeb := selector(map[string]string{"app": "web"})
	older := clusterSPIFFEID("older", 2*time.Hour, spirev1alpha1.ClusterSPIFFEIDSpec{
		SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/older/{{ .PodMeta.Name }}", PodSelector: selectWeb,
		DNSNameTemplates: []string{"older.example.com"},
	})
	newer := clusterSPIFFEID("newer", time.Hour, spirev1alpha1.ClusterSPIFFEIDSpec{
		SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/newer/{{ .PodMeta.Name }}", PodSelector: selectWeb,
		DNSNameTemplates: []string{"newer.example.com", "{{ .PodMeta.Name }}.newer.example.com"},
	})
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		wantID      string
		wantDNS     []string
	}{
		{name: "no annotation: the older", wantID: "spiffe://example.org/older/web", wantDNS: []string{"older.example.com"}},
		{name: "annotation names the newer", annotations: map[string]string{podcert.AnnotationClusterSPIFFEID: "newer"},
			wantID: "spiffe://example.org/newer/web", wantDNS: []string{"newer.example.com", "web.newer.example.com"}},
		{name: "annotation names the older", annotations: map[string]string{podcert.AnnotationClusterSPIFFEID: "older"},
			wantID: "spiffe://example.org/older/web", wantDNS: []string{"older.example.com"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, envOptions{})
			cl := newCluster()
			env.add(t, cl.ns, cl.node, cl.pod, newer, older)
			key := newP256Key(t)
			req := kubeletRequest(t, cl.pod, cl.node, key)
			req.Spec.UnverifiedUserAnnotations = tc.annotations
			env.add(t, req)
			if err := env.sync(req); err != nil {
				t.Fatalf("syncRequest: %v", err)
			}
			checkIssued(t, env, req, key, tc.wantID, tc.wantDNS)
		})
	}
}

// denialCase is a request that must end Denied (or Failed) with a reason and a message that
// names what is wrong.
type denialCase struct {
	name string
	// setup changes the cluster and the request before they are added to the API server
	// and the caches; it may add objects of its own to env.
	setup        func(t *testing.T, env *testEnv, cl *cluster, req *certificatesv1.PodCertificateRequest)
	key          func(t *testing.T) crypto.Signer // nil: a P-256 key
	options      func(*Options)
	wantType     string // Denied unless set
	wantReason   podcert.Reason
	wantMessages []string // substrings of the message
}

// runDenials syncs each case's request and checks that it ended as the case says, with one
// write: the status update.
func runDenials(t *testing.T, cases []denialCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, envOptions{options: tc.options})
			cl := newCluster()
			key := newP256Key(t)
			if tc.key != nil {
				key = tc.key(t)
			}
			req := kubeletRequest(t, cl.pod, cl.node, key)
			if tc.setup != nil {
				tc.setup(t, env, &cl, req)
			}
			for _, obj := range []runtime.Object{cl.ns, cl.node, cl.pod, cl.csid} {
				if obj != nil && !isNil(obj) {
					env.add(t, obj)
				}
			}
			env.add(t, req)

			if err := env.sync(req); err != nil {
				t.Fatalf("syncRequest: %v", err)
			}
			got := env.request(t, req)
			cond := condition(t, got)
			wantType := tc.wantType
			if wantType == "" {
				wantType = certificatesv1.PodCertificateRequestConditionTypeDenied
			}
			if cond.Type != wantType || cond.Status != metav1.ConditionTrue || cond.Reason != string(tc.wantReason) {
				t.Errorf("condition %s=%s reason %s, want %s=True reason %s (message %q)", cond.Type, cond.Status, cond.Reason, wantType, tc.wantReason, cond.Message)
			}
			for _, m := range tc.wantMessages {
				if !strings.Contains(cond.Message, m) {
					t.Errorf("message %q does not say %q", cond.Message, m)
				}
			}
			if got.Status.CertificateChain != "" || got.Status.NotBefore != nil || got.Status.NotAfter != nil || got.Status.BeginRefreshAt != nil {
				t.Errorf("a %s request has certificate fields in its status: %+v", wantType, got.Status)
			}
			if diff := cmp.Diff([]string{"update podcertificaterequests/status " + req.Namespace + "/" + req.Name}, env.writes()); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
		})
	}
}

// isNil reports whether obj is a typed nil, which a setup leaves to say "absent".
func isNil(obj runtime.Object) bool {
	switch o := obj.(type) {
	case *corev1.Pod:
		return o == nil
	case *corev1.Node:
		return o == nil
	case *corev1.Namespace:
		return o == nil
	case *spirev1alpha1.ClusterSPIFFEID:
		return o == nil
	}
	return false
}

func p521Key(t *testing.T) crypto.Signer {
	key, err := ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func ed25519Key(t *testing.T) crypto.Signer {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// TestSyncRequestDeniesBadRequests: requests whose annotations, key, pod or node are wrong
// are denied, each with its reason and a message that names the culprit. The API server and
// the informers agree in every case, so the recheck confirms the denial.
func TestSyncRequestDeniesBadRequests(t *testing.T) {
	runDenials(t, []denialCase{
		{
			name: "unknown annotation key",
			setup: func(_ *testing.T, _ *testEnv, _ *cluster, req *certificatesv1.PodCertificateRequest) {
				req.Spec.UnverifiedUserAnnotations = map[string]string{"example.com/flavour": "vanilla"}
			},
			wantReason:   podcert.ReasonInvalidUnverifiedUserAnnotations,
			wantMessages: []string{`"example.com/flavour"`, podcert.AnnotationClusterSPIFFEID},
		},
		{
			name: "P-521 key", key: p521Key,
			wantReason: podcert.ReasonUnsupportedKeyType, wantMessages: []string{"ECDSA P-521", "ECDSA P-256"},
		},
		{
			name: "Ed25519 key", key: ed25519Key,
			wantReason: podcert.ReasonUnsupportedKeyType, wantMessages: []string{"Ed25519", "ECDSA P-256"},
		},
		{
			name: "pod succeeded",
			setup: func(_ *testing.T, _ *testEnv, cl *cluster, _ *certificatesv1.PodCertificateRequest) {
				cl.pod.Status.Phase = corev1.PodSucceeded
			},
			wantReason: podcert.ReasonPodFinished, wantMessages: []string{`"prod"/"web"`, "Succeeded"},
		},
		{
			name: "pod failed",
			setup: func(_ *testing.T, _ *testEnv, cl *cluster, _ *certificatesv1.PodCertificateRequest) {
				cl.pod.Status.Phase = corev1.PodFailed
			},
			wantReason: podcert.ReasonPodFinished, wantMessages: []string{`"prod"/"web"`, "Failed"},
		},
		{
			name: "pod not found",
			setup: func(_ *testing.T, _ *testEnv, cl *cluster, _ *certificatesv1.PodCertificateRequest) {
				cl.pod = nil
			},
			wantReason: podcert.ReasonPodNotFound, wantMessages: []string{`"prod"/"web"`},
		},
		{
			name: "node not found",
			setup: func(_ *testing.T, _ *testEnv, cl *cluster, _ *certificatesv1.PodCertificateRequest) {
				cl.node = nil
			},
			wantReason: podcert.ReasonNodeNotFound, wantMessages: []string{`"node-1"`},
		},
		{
			name: "pod UID differs: the pod was replaced",
			setup: func(_ *testing.T, _ *testEnv, cl *cluster, _ *certificatesv1.PodCertificateRequest) {
				cl.pod.UID = "uid-of-the-new-pod"
			},
			wantReason: podcert.ReasonPodMismatch, wantMessages: []string{"spec.podUID", string(newCluster().pod.UID), "uid-of-the-new-pod"},
		},
		{
			name: "node name differs from the pod's",
			setup: func(t *testing.T, env *testEnv, _ *cluster, req *certificatesv1.PodCertificateRequest) {
				other := node("node-2")
				env.add(t, other)
				req.Spec.NodeName, req.Spec.NodeUID = ktypes.NodeName(other.Name), other.UID
			},
			wantReason: podcert.ReasonPodMismatch, wantMessages: []string{"spec.nodeName", `"node-2"`, `"node-1"`},
		},
		{
			name: "node UID differs: the node was replaced",
			setup: func(_ *testing.T, _ *testEnv, cl *cluster, _ *certificatesv1.PodCertificateRequest) {
				cl.node.UID = "uid-of-the-new-node"
			},
			wantReason: podcert.ReasonPodMismatch, wantMessages: []string{"spec.nodeUID", "uid-of-the-new-node"},
		},
		{
			name: "service account differs",
			setup: func(_ *testing.T, _ *testEnv, _ *cluster, req *certificatesv1.PodCertificateRequest) {
				req.Spec.ServiceAccountName = "admin"
			},
			wantReason: podcert.ReasonPodMismatch, wantMessages: []string{"spec.serviceAccountName", `"admin"`, `"web-sa"`},
		},
	})
}

// TestSyncRequestRechecksLaggingInformer: a Denied condition is final, so a denial that
// rests only on an informer that has not caught up (the API server agrees with the request)
// is not written; the request is retried instead. When the API server agrees with the
// informer, the request is denied.
func TestSyncRequestRechecksLaggingInformer(t *testing.T) {
	for _, tc := range []struct {
		name string
		// cache and api change the pod and node the informers and the API server hold; nil
		// objects are absent.
		cache, api func(*cluster)
		wantDenied podcert.Reason // "": retried with errInformerLag
	}{
		{
			name:  "pod not in the informer yet",
			cache: func(cl *cluster) { cl.pod = nil },
		},
		{
			name:  "the informer holds the pod's predecessor",
			cache: func(cl *cluster) { cl.pod.UID = "uid-of-the-old-pod" },
		},
		{
			name:  "the informer holds the pod before it was bound",
			cache: func(cl *cluster) { cl.pod.Spec.NodeName = "" },
		},
		{
			name:  "node not in the informer yet",
			cache: func(cl *cluster) { cl.node = nil },
		},
		{
			name:  "the informer holds the node's predecessor",
			cache: func(cl *cluster) { cl.node.UID = "uid-of-the-old-node" },
		},
		{
			name:       "the API server agrees that the pod was replaced",
			cache:      func(cl *cluster) { cl.pod.UID = "uid-of-the-new-pod" },
			api:        func(cl *cluster) { cl.pod.UID = "uid-of-the-new-pod" },
			wantDenied: podcert.ReasonPodMismatch,
		},
		{
			name:       "the API server agrees that the pod is gone",
			cache:      func(cl *cluster) { cl.pod = nil },
			api:        func(cl *cluster) { cl.pod = nil },
			wantDenied: podcert.ReasonPodNotFound,
		},
		{
			name:       "the API server agrees that the node is gone",
			cache:      func(cl *cluster) { cl.node = nil },
			api:        func(cl *cluster) { cl.node = nil },
			wantDenied: podcert.ReasonNodeNotFound,
		},
		{
			name:       "the API server has the pod on another node, the informer its predecessor",
			cache:      func(cl *cluster) { cl.pod.UID = "uid-of-the-old-pod" },
			api:        func(cl *cluster) { cl.pod.Spec.NodeName = "node-2" },
			wantDenied: podcert.ReasonPodMismatch,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, envOptions{})
			key := newP256Key(t)
			base := newCluster()
			req := kubeletRequest(t, base.pod, base.node, key)

			for _, side := range []struct {
				change func(*cluster)
				add    func(*testing.T, ...runtime.Object)
			}{{tc.cache, env.addToCache}, {tc.api, env.addToAPI}} {
				cl := newCluster()
				cl.pod.UID, cl.node.UID = base.pod.UID, base.node.UID
				if side.change != nil {
					side.change(&cl)
				}
				for _, obj := range []runtime.Object{cl.ns, cl.node, cl.pod, cl.csid} {
					if !isNil(obj) {
						side.add(t, obj)
					}
				}
			}
			env.add(t, req)

			err := env.sync(req)
			if tc.wantDenied == "" {
				if !errors.Is(err, errInformerLag) {
					t.Fatalf("syncRequest = %v, want errInformerLag: the request is retried until the informers catch up", err)
				}
				if errors.Is(err, runner.ErrWaitForProbe) {
					t.Error("an informer lag waits for the CA probe; it must be retried with backoff")
				}
				if w := env.writes(); len(w) != 0 {
					t.Errorf("wrote %v while the informers lag", w)
				}
				return
			}
			if err != nil {
				t.Fatalf("syncRequest: %v", err)
			}
			cond := condition(t, env.request(t, req))
			if cond.Type != certificatesv1.PodCertificateRequestConditionTypeDenied || cond.Reason != string(tc.wantDenied) {
				t.Errorf("condition %s reason %s, want Denied reason %s", cond.Type, cond.Reason, tc.wantDenied)
			}
		})
	}
}

// TestSyncRequestIssuesOnceTheInformerCatchesUp: the retry after an informer lag issues.
func TestSyncRequestIssuesOnceTheInformerCatchesUp(t *testing.T) {
	env := newTestEnv(t, envOptions{})
	cl := newCluster()
	env.add(t, cl.ns, cl.node, cl.csid)
	env.addToAPI(t, cl.pod)
	key := newP256Key(t)
	req := kubeletRequest(t, cl.pod, cl.node, key)
	env.add(t, req)
	if err := env.sync(req); !errors.Is(err, errInformerLag) {
		t.Fatalf("syncRequest = %v, want errInformerLag", err)
	}
	env.addToCache(t, cl.pod)
	if err := env.sync(req); err != nil {
		t.Fatalf("syncRequest after the informer caught up: %v", err)
	}
	checkIssued(t, env, req, key, "spiffe://example.org/ns/prod/sa/web-sa", []string{"web.prod.svc"})
}

// TestSyncRequestSkips: a request that has ended, is of another signer or is gone is left
// alone.
func TestSyncRequestSkips(t *testing.T) {
	ended := func(condType string) func(*certificatesv1.PodCertificateRequest) {
		return func(req *certificatesv1.PodCertificateRequest) {
			req.Status.Conditions = []metav1.Condition{{Type: condType, Status: metav1.ConditionTrue, Reason: "Before"}}
		}
	}
	for _, tc := range []struct {
		name   string
		change func(*certificatesv1.PodCertificateRequest)
		absent bool
	}{
		{name: "issued", change: ended(certificatesv1.PodCertificateRequestConditionTypeIssued)},
		{name: "denied", change: ended(certificatesv1.PodCertificateRequestConditionTypeDenied)},
		{name: "failed", change: ended(certificatesv1.PodCertificateRequestConditionTypeFailed)},
		{name: "another signer", change: func(req *certificatesv1.PodCertificateRequest) { req.Spec.SignerName = "example.com/other" }},
		{name: "deleted", absent: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, envOptions{})
			cl := newCluster()
			env.add(t, cl.objects()...)
			req := kubeletRequest(t, cl.pod, cl.node, newP256Key(t))
			if tc.change != nil {
				tc.change(req)
			}
			if !tc.absent {
				env.add(t, req)
			}
			if err := env.sync(req); err != nil {
				t.Fatalf("syncRequest: %v", err)
			}
			if w := env.writes(); len(w) != 0 {
				t.Errorf("wrote %v", w)
			}
		})
	}
}

// TestSyncRequestDryRun: a dry run writes no request status, whether it would issue, deny
// or fail the request.
func TestSyncRequestDryRun(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*cluster, *certificatesv1.PodCertificateRequest)
		noCA   bool
	}{
		{name: "would issue"},
		{name: "would deny", change: func(cl *cluster, _ *certificatesv1.PodCertificateRequest) { cl.pod.Status.Phase = corev1.PodSucceeded }},
		{name: "would fail: no CA for too long", noCA: true, change: func(_ *cluster, req *certificatesv1.PodCertificateRequest) {
			req.CreationTimestamp = metav1.NewTime(time.Now().Add(-time.Hour))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, envOptions{noStart: tc.noCA, options: func(o *Options) {
				o.DryRun = true
				o.FailPendingAfter = time.Minute
			}})
			cl := newCluster()
			req := kubeletRequest(t, cl.pod, cl.node, newP256Key(t))
			if tc.change != nil {
				tc.change(&cl, req)
			}
			env.add(t, cl.objects()...)
			env.add(t, req)
			if err := env.sync(req); err != nil {
				t.Fatalf("syncRequest: %v", err)
			}
			if w := env.writes(); len(w) != 0 {
				t.Errorf("a dry run wrote %v", w)
			}
			if got := env.request(t, req); len(got.Status.Conditions) != 0 || got.Status.CertificateChain != "" {
				t.Errorf("a dry run changed the request's status: %+v", got.Status)
			}
		})
	}
}

// TestSyncRequestWithTrimmedPods: with pods cached as the binary caches them
// (informercache.NewTrim), a request is checked and issued as with whole pods; a
// ClusterSPIFFEID that reads a field the cache does not keep renders from the pod read whole.
func TestSyncRequestWithTrimmedPods(t *testing.T) {
	for _, tc := range []struct {
		name       string
		change     func(*corev1.Pod)
		dnsName    string         // the ClusterSPIFFEID's DNS name template, when not the usual one
		wantDNS    string         // the certificate's DNS name: "web.prod.svc" when empty
		wantDenied podcert.Reason // "": issued
	}{
		{name: "issued"},
		{name: "pod finished", change: func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }, wantDenied: podcert.ReasonPodFinished},
		{name: "pod replaced", change: func(p *corev1.Pod) { p.UID = "uid-of-the-new-pod" }, wantDenied: podcert.ReasonPodMismatch},
		{name: "template reads a container", change: func(p *corev1.Pod) { p.Spec.Containers = []corev1.Container{{Name: "app"}} },
			dnsName: "{{ (index .PodSpec.Containers 0).Name }}.{{ .PodMeta.Namespace }}.svc", wantDNS: "app.prod.svc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, envOptions{})
			cl := newCluster()
			if tc.dnsName != "" {
				cl.csid.Spec.DNSNameTemplates = []string{tc.dnsName}
			}
			key := newP256Key(t)
			req := kubeletRequest(t, cl.pod, cl.node, key)
			if tc.change != nil {
				tc.change(cl.pod)
			}
			env.add(t, cl.ns, cl.node, cl.csid)
			env.addToAPI(t, cl.pod)
			env.add(t, req)
			trimmed, err := informercache.NewTrim()(cl.pod.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			env.addToCache(t, trimmed.(*corev1.Pod))
			if err := env.sync(req); err != nil {
				t.Fatalf("syncRequest: %v", err)
			}
			if tc.wantDenied == "" {
				dns := tc.wantDNS
				if dns == "" {
					dns = "web.prod.svc"
				}
				checkIssued(t, env, req, key, "spiffe://example.org/ns/prod/sa/web-sa", []string{dns})
				return
			}
			if cond := condition(t, env.request(t, req)); cond.Reason != string(tc.wantDenied) {
				t.Errorf("reason %s (%q), want %s", cond.Reason, cond.Message, tc.wantDenied)
			}
		})
	}
}
