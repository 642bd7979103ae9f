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

package webhook

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/render"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// TestWebhookRefusesTemplatesPastTheMemoryBudget applies, through a real kube-apiserver that
// calls the webhook with the controller's own validation, the ClusterSPIFFEID found on a real
// cluster: a SPIFFE ID template that passes a 2 KiB string to printf a hundred thousand times.
// It is refused, naming the field, and so is a shorter one that fits the length limit but
// would allocate past the render budget, and one with 14,000 invalid templates, past the cap
// of one object; an ordinary one is admitted.
func TestWebhookRefusesTemplatesPastTheMemoryBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("needs real kube-apiserver and spire-server; skipped with -short")
	}
	stack := realcluster.NewStack(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	client, err := spire.Dial(ctx, stack.SPIRE.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	serveThroughAPIServer(t, ctx, stack, client, Validators{
		ClusterSPIFFEID: func(o *spirev1alpha1.ClusterSPIFFEID) field.ErrorList {
			return render.ValidateClusterSPIFFEID(o, stack.SPIRE.TrustDomain())
		},
		ClusterFederatedTrustDomain: func(*spirev1alpha1.ClusterFederatedTrustDomain) field.ErrorList { return nil },
	})

	create := func(name, template string) error {
		_, err := stack.SpireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, &spirev1alpha1.ClusterSPIFFEID{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: template}}, metav1.CreateOptions{})
		return err
	}
	// The API server calls the webhook once it trusts the caBundle the webhook writes.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		err := create("good", "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/{{ printf \"%s\" .PodMeta.Name }}")
		if err != nil {
			t.Logf("create good ClusterSPIFFEID: %v", err)
		}
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("a valid ClusterSPIFFEID was never admitted: %v", err)
	}

	printed := func(n int) string {
		// It starts with spiffe:// as the CRD's pattern asks, so that the webhook sees it.
		return `spiffe://{{ $s := "` + strings.Repeat("x", 2048) + `" }}{{ .TrustDomain }}/{{ printf "` +
			strings.Repeat("%s", n) + `" ` + strings.Repeat("$s ", n) + `}}`
	}
	// The reported object with 14,000 invalid one-action templates (110 KiB): past the cap of
	// templates of one object, refused with one error, without parsing any.
	invalid := make([]string, 14000)
	for i := range invalid {
		invalid[i] = "{{x}}"
	}
	began := time.Now()
	_, err = stack.SpireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, &spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: "many"}, Spec: spirev1alpha1.ClusterSPIFFEIDSpec{
			SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/x", DNSNameTemplates: invalid}}, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "templates, more than the 128") || len(err.Error()) > 1000 {
		t.Errorf("ClusterSPIFFEID with 14,000 invalid templates: got %.300v, want one short denial naming the cap", err)
	}
	t.Logf("the ClusterSPIFFEID with 14,000 invalid templates was refused in %v", time.Since(began))

	for _, tc := range []struct {
		name, template, detail string
	}{
		{"reported", printed(100000), "Too long"},
		{"over-budget", printed(1000), "would allocate more than"},
	} {
		err := create(tc.name, tc.template)
		if err == nil || !strings.Contains(err.Error(), "spec.spiffeIDTemplate") || !strings.Contains(err.Error(), tc.detail) {
			msg := fmt.Sprint(err)
			if len(msg) > 500 {
				msg = msg[:200] + "…" + msg[len(msg)-300:]
			}
			t.Errorf("%s ClusterSPIFFEID: got %s, want a denial naming spec.spiffeIDTemplate with %q", tc.name, msg, tc.detail)
		}
	}
}
