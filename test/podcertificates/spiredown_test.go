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
	"fmt"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// TestSPIREDownHoldsIssuance starts spire-registrar while the SPIRE server is down, so that it
// has no CA: a pod's request then stays pending, neither Denied nor Failed, while
// spire-registrar keeps trying SPIRE, and is issued once SPIRE is back. The agent keeps
// serving spire-registrar's X509-SVID from its cache meanwhile, as it does when its server is
// unreachable.
func TestSPIREDownHoldsIssuance(t *testing.T) {
	start := time.Now()
	w := newWorld(t, worldOptions{})
	ctx := t.Context()
	// Declared before spire-registrar starts: its informers list them before it decides
	// anything.
	w.createClusterSPIFFEID(t, "web", podIdentity("web"))
	pod := w.createPod(t, "web-0", podOptions{serviceAccount: "web", labels: map[string]string{"app": "web"}})

	w.stack.SPIRE.Kill()
	stopped := time.Now()
	r := w.start(t)
	// The gate: spire-registrar asked SPIRE for its CA and failed.
	_, tried := waitMetrics(t, r, time.Minute, "a failed request for the CA", func(m map[string]float64) bool {
		return m[caRenewalsError] >= 1 && m[resyncFailures] >= 1
	})
	t.Logf("SPIRE killed; spire-registrar started, asked SPIRE for a CA and failed %s later (CA requests failed: %v; resyncs failed: %v)",
		tried.at.Sub(stopped).Round(time.Millisecond), tried.series[caRenewalsError], tried.series[resyncFailures])

	pcr, _ := w.request(t, pod, realcluster.PodCertificateRequestOptions{})
	requested := time.Now()
	failuresAtRequest := tried.series[resyncFailures]
	// While spire-registrar retries five more times (its backoff doubles from 100ms, so that
	// takes seconds), the request must stay pending at every look: Denied or Failed would be
	// final for the pod's volume.
	const retries = 5
	var last sample
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := w.admin.CertificatesV1().PodCertificateRequests(namespace).Get(ctx, pcr.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if o := realcluster.PodCertificateRequestOutcome(got); o != "" || len(got.Status.Conditions) > 0 {
			return false, fmt.Errorf("request %s with SPIRE down, want it pending: %+v", o, got.Status.Conditions)
		}
		series, err := r.Scrape(ctx)
		if err != nil {
			return false, nil
		}
		last = sample{at: time.Now(), series: series}
		return series[resyncFailures] >= failuresAtRequest+retries, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the request stayed pending %s while spire-registrar failed to reach SPIRE %v more times",
		last.at.Sub(requested).Round(time.Millisecond), last.series[resyncFailures]-failuresAtRequest)

	if err := w.stack.SPIRE.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	got := w.waitEnded(t, pcr)
	issued := time.Now()
	if o := realcluster.PodCertificateRequestOutcome(got); o != certificatesv1.PodCertificateRequestConditionTypeIssued {
		t.Fatalf("request %s after SPIRE came back, want Issued: %+v", o, got.Status.Conditions)
	}
	chain := parseChain(t, got.Status.CertificateChain)
	id, _, err := x509svid.Verify(chain, w.spireBundle(t))
	if err != nil {
		t.Fatalf("the certificate issued after SPIRE came back does not verify against its bundle: %v", err)
	}
	if id.String() != saID("web") {
		t.Errorf("SPIFFE ID %s, want %s", id, saID("web"))
	}
	t.Logf("SPIRE ready again → request Issued in %s (pending %s in all); spire-registrar retries with backoff, 100ms doubling to 30s",
		issued.Sub(back).Round(time.Millisecond), issued.Sub(requested).Round(time.Millisecond))
	t.Logf("test took %s", time.Since(start).Round(time.Millisecond))
}
