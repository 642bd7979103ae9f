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
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/spire-registrar/spire-registrar/pkg/explain"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// TestExplainPodCertificates runs `spire-registrar explain` with the signer's config against
// the real kube-apiserver and spire-server: for a pod whose request was issued, it names the
// certificate's SPIFFE ID and the ClusterSPIFFEID that gives it, for the pod's volume and for
// the request; for a pod no ClusterSPIFFEID selects, it says the signer gives it no identity,
// and why.
func TestExplainPodCertificates(t *testing.T) {
	start := time.Now()
	w := newWorld(t, worldOptions{})
	w.startReady(t)
	w.createClusterSPIFFEID(t, "web", podIdentity("web"))
	web := w.createPod(t, "web-0", podOptions{serviceAccount: "web", labels: map[string]string{"app": "web"}})
	w.waitEntry(t, saID("web"), true)
	pcr, _ := w.request(t, web, realcluster.PodCertificateRequestOptions{})
	if got := w.waitEnded(t, pcr); realcluster.PodCertificateRequestOutcome(got) != certificatesv1.PodCertificateRequestConditionTypeIssued {
		t.Fatalf("request for web-0 not issued: %+v", got.Status.Conditions)
	}
	lone := w.createPod(t, "lone-0", podOptions{labels: map[string]string{"app": "lone"}})

	configPath := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(configPath, []byte(w.config()), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, args ...string) []*explain.PodCertificate {
		t.Helper()
		args = append([]string{"explain"}, append(args, "--config", configPath, "--kubeconfig", w.stack.Kube.Kubeconfig())...)
		cmd := exec.CommandContext(t.Context(), w.bin, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("spire-registrar %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		if !slices.Contains(args, "json") {
			t.Logf("$ spire-registrar %s\n%s", strings.Join(args[:3], " "), stdout.String())
			return nil
		}
		var answers []*explain.PodCertificate
		if err := json.Unmarshal(stdout.Bytes(), &answers); err != nil {
			t.Fatalf("explain -o json: %v\n%s", err, stdout.String())
		}
		return answers
	}

	for _, args := range [][]string{
		{"podcertificate", namespace + "/" + web.Name, "--volume", "svid", "-o", "json"},
		{"podcertificaterequest", namespace + "/" + pcr.Name, "-o", "json"},
	} {
		answers := run(t, args...)
		if len(answers) != 1 {
			t.Fatalf("explain %s: %d answers, want 1", args[0], len(answers))
		}
		a := answers[0]
		if a.State != explain.CertificateIssued || a.Certificate == nil || a.Certificate.SPIFFEID != saID("web") || a.Certificate.ClusterSPIFFEID != "web" {
			t.Errorf("explain %s: state %s, certificate %+v; want Issued %s from ClusterSPIFFEID web", args[0], a.State, a.Certificate, saID("web"))
		}
		if a.Request != namespace+"/"+pcr.Name {
			t.Errorf("explain %s: request %s, want %s/%s", args[0], a.Request, namespace, pcr.Name)
		}
	}
	run(t, "podcertificate", namespace+"/"+web.Name)

	answers := run(t, "podcertificate", namespace+"/"+lone.Name, "-o", "json")
	if len(answers) != 1 {
		t.Fatalf("explain podcertificate lone-0: %d answers, want 1", len(answers))
	}
	if a := answers[0]; a.State != explain.CertificateNoRequest || a.Identity != nil || !strings.Contains(a.IdentityProblem, "no ClusterSPIFFEID of the class selects the pod") {
		t.Errorf("explain podcertificate lone-0: state %s, identity %+v, problem %q; want NoRequest and no ClusterSPIFFEID selecting it", a.State, a.Identity, a.IdentityProblem)
	}
	run(t, "podcertificate", namespace+"/"+lone.Name)
	t.Logf("test took %s", time.Since(start).Round(time.Millisecond))
}
