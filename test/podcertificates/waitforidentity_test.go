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
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// waitingNoIdentity counts the requests that wait because no ClusterSPIFFEID gives their pod
// an identity.
const waitingNoIdentity = `spire_registrar_pod_certificate_requests_waiting{reason="NoIdentity"}`

// TestNoIdentityWaits: a request made while no ClusterSPIFFEID gives its pod an identity (a
// GitOps tool deleting and creating it again, a label not applied yet) is not denied, which
// the kubelet would take as final: it waits, counted by the waiting metric. A ClusterSPIFFEID
// created meanwhile gets it issued at once, not when the wait runs out; a request whose
// identity never comes is denied once waitForIdentity has passed, and no longer counted.
func TestNoIdentityWaits(t *testing.T) {
	w := newWorld(t, worldOptions{})

	t.Run("ClusterSPIFFEID created while it waits", func(t *testing.T) {
		// The resync, which queues every pending request, runs once an hour: only the
		// ClusterSPIFFEID's event can bring the request back before its wait runs out.
		w.waitForIdentity, w.gcInterval = 5*time.Minute, time.Hour
		r := w.startReady(t)
		pod := w.createPod(t, "comeback-0", podOptions{serviceAccount: "comeback", labels: map[string]string{"app": "comeback"}})
		pcr, key := w.request(t, pod, realcluster.PodCertificateRequestOptions{})
		w.waitUntilWaiting(t, r, pcr, 1)

		w.createClusterSPIFFEID(t, "comeback", podIdentity("comeback"))
		created := time.Now()
		// Well under the 5 minutes of the wait: issued by the event, or not at all.
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		got, err := realcluster.WaitPodCertificateIssued(ctx, w.admin, pcr.Namespace, pcr.Name)
		if err != nil {
			t.Fatalf("not issued within a minute of the ClusterSPIFFEID's creation (it waits %v): %v", w.waitForIdentity, err)
		}
		if o := realcluster.PodCertificateRequestOutcome(got); o != certificatesv1.PodCertificateRequestConditionTypeIssued {
			t.Fatalf("request %s, want Issued: %+v", o, got.Status.Conditions)
		}
		chain := parseChain(t, got.Status.CertificateChain)
		id, _, err := x509svid.ParseAndVerify(rawCerts(chain), w.spireBundle(t))
		if err != nil {
			t.Fatalf("the issued chain does not verify as an X509-SVID against SPIRE's bundle: %v", err)
		}
		if id.String() != saID("comeback") {
			t.Errorf("SPIFFE ID %s, want %s", id, saID("comeback"))
		}
		if pub, ok := chain[0].PublicKey.(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(key.Public()) {
			t.Error("the certificate is not for the request's key")
		}
		t.Logf("issued %v after the ClusterSPIFFEID was created", time.Since(created).Round(time.Millisecond))
		waitMetrics(t, r, 10*time.Second, "the request no longer counted as waiting", func(s map[string]float64) bool { return s[waitingNoIdentity] == 0 })
	})

	t.Run("identity that never comes", func(t *testing.T) {
		w.waitForIdentity, w.gcInterval = 3*time.Second, gcInterval
		r := w.startReady(t)
		pod := w.createPod(t, "lonely-0", podOptions{serviceAccount: "lonely"})
		pcr, _ := w.request(t, pod, realcluster.PodCertificateRequestOptions{})
		w.waitUntilWaiting(t, r, pcr, 1)

		got := w.waitEnded(t, pcr)
		cond := meta.FindStatusCondition(got.Status.Conditions, certificatesv1.PodCertificateRequestConditionTypeDenied)
		if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != "NoIdentity" {
			t.Fatalf("request %s, want Denied with NoIdentity: %+v", realcluster.PodCertificateRequestOutcome(got), got.Status.Conditions)
		}
		// Condition times have a resolution of a second.
		if waited := cond.LastTransitionTime.Sub(got.CreationTimestamp.Time); waited < w.waitForIdentity-time.Second {
			t.Errorf("denied %v after its creation, want no sooner than waitForIdentity (%v)", waited, w.waitForIdentity)
		}
		t.Logf("Denied, %s: %s", cond.Reason, cond.Message)
		waitMetrics(t, r, 10*time.Second, "the denied request no longer counted as waiting", func(s map[string]float64) bool { return s[waitingNoIdentity] == 0 })
	})
}

// waitUntilWaiting waits until spire-registrar counts n requests waiting for an identity; the
// test fails at once if pcr ends first, as a signer that denies at once ends it.
func (w *world) waitUntilWaiting(t *testing.T, r *realcluster.Registrar, pcr *certificatesv1.PodCertificateRequest, n float64) {
	t.Helper()
	var ended *certificatesv1.PodCertificateRequest
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := w.admin.CertificatesV1().PodCertificateRequests(pcr.Namespace).Get(ctx, pcr.Name, metav1.GetOptions{})
		if err == nil && realcluster.PodCertificateRequestOutcome(got) != "" {
			ended = got
			return true, nil
		}
		series, err := r.Scrape(ctx)
		return err == nil && series[waitingNoIdentity] == n, nil
	})
	switch {
	case ended != nil:
		t.Fatalf("request %s/%s ended (%s) instead of waiting for its pod's identity: %+v", pcr.Namespace, pcr.Name,
			realcluster.PodCertificateRequestOutcome(ended), ended.Status.Conditions)
	case err != nil:
		t.Fatalf("spire-registrar never counted %v requests waiting for an identity: %v", n, err)
	}
}
