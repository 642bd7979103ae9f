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
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// TestDryRunSignsNothing runs spire-registrar with --dry-run: it decides as it would, and
// says so in its log, but writes no request status and no ClusterTrustBundle.
func TestDryRunSignsNothing(t *testing.T) {
	w := newWorld(t, worldOptions{})
	r := w.start(t, "--dry-run")
	r.WaitReady(t)
	w.createClusterSPIFFEID(t, "web", podIdentity("web"))
	pod := w.createPod(t, "web-0", podOptions{serviceAccount: "web", labels: map[string]string{"app": "web"}})
	pcr, _ := w.request(t, pod, realcluster.PodCertificateRequestOptions{})

	// The gate: the log says the request would be issued, with the SPIFFE ID it would carry.
	wouldIssue := regexp.MustCompile(`"Dry run: would issue" .*podCertificateRequest="` + regexp.QuoteMeta(pcr.Namespace+"/"+pcr.Name) +
		`" spiffeID="` + regexp.QuoteMeta(saID("web")) + `"`)
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return wouldIssue.MatchString(r.Logs()), nil
	}); err != nil {
		t.Fatalf("the log never matched %s", wouldIssue)
	}
	if !strings.Contains(r.Logs(), `"Dry run: would create ClusterTrustBundle"`) {
		t.Error("the log does not say the ClusterTrustBundle would be created")
	}

	got, err := w.admin.CertificatesV1().PodCertificateRequests(pcr.Namespace).Get(t.Context(), pcr.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if o := realcluster.PodCertificateRequestOutcome(got); o != "" || got.Status.CertificateChain != "" {
		t.Errorf("a dry run wrote the request's status: outcome %q, %d bytes of chain", o, len(got.Status.CertificateChain))
	}
	bundles, err := w.admin.CertificatesV1().ClusterTrustBundles().List(t.Context(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.signerName", signerName).String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(bundles.Items) != 0 {
		t.Errorf("a dry run created %d ClusterTrustBundles of the signer", len(bundles.Items))
	}
}
