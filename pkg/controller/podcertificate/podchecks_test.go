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
	"maps"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/spire-registrar/spire-registrar/pkg/podcert"
)

// TestSyncRequestDeniesWhatTheKubeletWouldNotAsk: a request its pod's kubelet would not have
// made, as a creator that is not the pod's node can make it, is denied: the pod mounts no
// podCertificate volume for the signer with the request's lifetime and user annotations, the
// service account's UID is not the request's, or the pod is being deleted.
func TestSyncRequestDeniesWhatTheKubeletWouldNotAsk(t *testing.T) {
	mount := func(cl *cluster, src corev1.PodCertificateProjection) {
		cl.pod.Spec.Volumes = append(cl.pod.Spec.Volumes, podCertificateVolume(src))
	}
	runDenials(t, []denialCase{
		{
			name: "a volume of another signer only",
			setup: func(_ *testing.T, _ *testEnv, cl *cluster, _ *certificatesv1.PodCertificateRequest) {
				mount(cl, corev1.PodCertificateProjection{SignerName: "example.com/other"})
			},
			wantReason: podcert.ReasonNoPodCertificateVolume, wantMessages: []string{`"prod"/"web" mounts no podCertificate volume for signer "spire.spiffe.io/x509-svid"`},
		},
		{
			name: "user annotations the volume does not have",
			setup: func(_ *testing.T, _ *testEnv, cl *cluster, req *certificatesv1.PodCertificateRequest) {
				mount(cl, corev1.PodCertificateProjection{SignerName: testSignerName})
				req.Spec.UnverifiedUserAnnotations = map[string]string{podcert.AnnotationClusterSPIFFEID: cl.csid.Name}
			},
			wantReason: podcert.ReasonNoPodCertificateVolume, wantMessages: []string{`user annotations {"spire.spiffe.io/clusterspiffeid"="web-identity"}`},
		},
		{
			name: "a lifetime the volume does not ask",
			setup: func(_ *testing.T, _ *testEnv, cl *cluster, req *certificatesv1.PodCertificateRequest) {
				mount(cl, corev1.PodCertificateProjection{SignerName: testSignerName, MaxExpirationSeconds: ptr.To[int32](3600)})
				req.Spec.MaxExpirationSeconds = ptr.To[int32](91 * 86400)
			},
			wantReason: podcert.ReasonNoPodCertificateVolume, wantMessages: []string{"maxExpirationSeconds 7862400", "have maxExpirationSeconds 3600"},
		},
		{
			name: "a wrong service account UID",
			setup: func(_ *testing.T, _ *testEnv, _ *cluster, req *certificatesv1.PodCertificateRequest) {
				req.Spec.ServiceAccountUID = "uid-of-another-service-account"
			},
			wantReason: podcert.ReasonPodMismatch, wantMessages: []string{`spec.serviceAccountUID is "uid-of-another-service-account", the service account's UID is "uid-sa-web-sa"`},
		},
		{
			name: "a pod being deleted",
			setup: func(_ *testing.T, _ *testEnv, cl *cluster, _ *certificatesv1.PodCertificateRequest) {
				cl.pod.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			},
			wantReason: podcert.ReasonPodDeleting, wantMessages: []string{`pod "prod"/"web" is being deleted`},
		},
	})
}

// TestSyncRequestDeniesAPodDeletedSinceTheInformerSawIt: the pod cache may not have seen the
// deletion yet; the API server's pod, read for its volumes, has.
func TestSyncRequestDeniesAPodDeletedSinceTheInformerSawIt(t *testing.T) {
	env := newTestEnv(t, envOptions{})
	cl := newCluster()
	env.addToCache(t, cl.pod)
	deleting := cl.pod.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	env.addToAPI(t, deleting)
	env.add(t, cl.ns, cl.node, cl.csid)
	req := kubeletRequest(t, cl.pod, cl.node, newP256Key(t))
	env.add(t, req)
	if err := env.sync(req); err != nil {
		t.Fatalf("syncRequest: %v", err)
	}
	if cond := condition(t, env.request(t, req)); cond.Reason != string(podcert.ReasonPodDeleting) {
		t.Errorf("reason %s (%q), want %s", cond.Reason, cond.Message, podcert.ReasonPodDeleting)
	}
}

// TestSyncRequestDeniesIdentitiesSPIRERefuses: IDs SPIRE registers for no workload, the
// signer's own, and admin or downstream identities unless the config allows them.
func TestSyncRequestDeniesIdentitiesSPIRERefuses(t *testing.T) {
	signerID := spiffeid.RequireFromString("spiffe://example.org/spire-registrar")
	template := func(tmpl string) func(*testing.T, *testEnv, *cluster, *certificatesv1.PodCertificateRequest) {
		return func(_ *testing.T, _ *testEnv, cl *cluster, _ *certificatesv1.PodCertificateRequest) {
			cl.csid.Spec.SPIFFEIDTemplate = tmpl
		}
	}
	runDenials(t, []denialCase{
		{
			name: "an agent's ID", setup: template("spiffe://{{ .TrustDomain }}/spire/agent/k8s_psat/{{ .PodMeta.Name }}"),
			wantReason: podcert.ReasonReservedSPIFFEID, wantMessages: []string{`"spiffe://example.org/spire/agent/k8s_psat/web"`, "under /spire"},
		},
		{
			name: "the signer's own ID", setup: template("spiffe://{{ .TrustDomain }}/spire-registrar"),
			options:    func(o *Options) { o.Identity.SignerID = signerID },
			wantReason: podcert.ReasonReservedSPIFFEID, wantMessages: []string{"the signer's own SPIFFE ID"},
		},
		{
			name: "an admin identity",
			setup: func(_ *testing.T, _ *testEnv, cl *cluster, _ *certificatesv1.PodCertificateRequest) {
				cl.csid.Spec.Admin = true
			},
			wantReason: podcert.ReasonPrivilegedIdentity, wantMessages: []string{"ClusterSPIFFEID web-identity is admin", "podCertificates.allowAdminIdentities"},
		},
		{
			name: "a downstream identity",
			setup: func(_ *testing.T, _ *testEnv, cl *cluster, _ *certificatesv1.PodCertificateRequest) {
				cl.csid.Spec.Downstream = true
			},
			options:    func(o *Options) { o.Identity.AllowAdmin = true },
			wantReason: podcert.ReasonPrivilegedIdentity, wantMessages: []string{"ClusterSPIFFEID web-identity is downstream", "podCertificates.allowDownstreamIdentities"},
		},
	})
	// Allowed, the same admin and downstream identity is issued.
	env := newTestEnv(t, envOptions{options: func(o *Options) { o.Identity.AllowAdmin, o.Identity.AllowDownstream = true, true }})
	cl := newCluster()
	cl.csid.Spec.Admin, cl.csid.Spec.Downstream = true, true
	env.add(t, cl.objects()...)
	key := newP256Key(t)
	req := kubeletRequest(t, cl.pod, cl.node, key)
	env.add(t, req)
	if err := env.sync(req); err != nil {
		t.Fatalf("syncRequest: %v", err)
	}
	checkIssued(t, env, req, key, "spiffe://example.org/ns/prod/sa/web-sa", []string{"web.prod.svc"})
}

// TestPodLookupsAreCached: what the informers do not hold of a pod and its service account is
// read with a get of one object, once: the pod's volumes for as long as the pod (its UID)
// lives, the service account's UID for a minute. No request lists anything.
func TestPodLookupsAreCached(t *testing.T) {
	env := newTestEnv(t, envOptions{})
	cl := newCluster()
	env.add(t, cl.objects()...)
	env.kube.ClearActions() // what the controller read at start
	for range 3 {
		key := newP256Key(t)
		req := kubeletRequest(t, cl.pod, cl.node, key)
		env.add(t, req)
		if err := env.sync(req); err != nil {
			t.Fatalf("syncRequest: %v", err)
		}
		checkIssued(t, env, req, key, "spiffe://example.org/ns/prod/sa/web-sa", []string{"web.prod.svc"})
	}
	reads := map[string]int{}
	for _, a := range env.kube.Actions() {
		// The test reads the requests back itself.
		if (a.GetVerb() == "get" || a.GetVerb() == "list") && a.GetResource().Resource != "podcertificaterequests" {
			reads[a.GetVerb()+" "+a.GetResource().Resource]++
		}
	}
	if want := map[string]int{"get pods": 1, "get serviceaccounts": 1}; !maps.Equal(reads, want) {
		t.Errorf("three requests for one pod read %v from the API server, want %v", reads, want)
	}
}
