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

package manifests_test

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/spire-registrar/spire-registrar/pkg/config"
)

// TestTCPMTLSManifests checks what `kubectl apply -k manifests/tcp-mtls` creates: the same
// objects as the standalone topology, but a pod that shares nothing with the SPIRE server: it
// reaches the server's TCP address with an X509-SVID from the agent's Workload API, mounted by
// the SPIFFE CSI driver.
func TestTCPMTLSManifests(t *testing.T) {
	objs := kustomize(t, "manifests", "tcp-mtls")
	checkOwnDeploymentTopology(t, objs, "manifests/tcp-mtls")

	d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", "spire-registrar"))
	spec := &d.Spec.Template.Spec
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 || !slices.Contains(spec.Containers[0].Args, "--leader-elect=true") {
		t.Errorf("replicas %v, args %v: want >= 2 replicas under --leader-elect=true", d.Spec.Replicas, spec.Containers[0].Args)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(spec.Containers))
	}
	checkRegistrarContainer(t, objs, spec, &spec.Containers[0], "healthz")

	// Nothing ties the pod to the SPIRE server's node or filesystem.
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			t.Errorf("volume %s is a hostPath", v.Name)
		}
	}
	if spec.Affinity != nil && spec.Affinity.PodAffinity != nil {
		t.Errorf("pod affinity %+v: the pod needs no SPIRE server beside it", spec.Affinity.PodAffinity)
	}

	cm := typed[corev1.ConfigMap](t, find(t, objs, "ConfigMap", "spire-registrar"))
	cfg, err := config.Parse([]byte(cm.Data["config.yaml"]))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SPIREServerAddress == "" || cfg.SPIREServerSocketPath != "" {
		t.Errorf("config reaches SPIRE at address %q, socket %q: want the TCP address only", cfg.SPIREServerAddress, cfg.SPIREServerSocketPath)
	}
	// Without a prefix spire-registrar would delete its own admin entry at the first resync.
	if cfg.EntryIDPrefix == "" {
		t.Errorf("entryIDPrefix is not set: spire-registrar would own, and delete, the admin entry its SVID comes from")
	}
}

// TestNamespaceIsSetInOnePlace renders the TCP-mTLS topology, with the pod-certificates
// component, from a kustomization that sets another namespace, as manifests/README.md tells
// operators to: every namespaced object and every binding's ServiceAccount subject must move
// there, so that the kustomization's `namespace:` is the only place to change.
func TestNamespaceIsSetInOnePlace(t *testing.T) {
	const elsewhere = "spire-elsewhere"
	objs := kustomize(t, "test", "manifests", "testdata", "other-namespace")
	bindings := 0
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRoleBinding", "RoleBinding":
			bindings++
			b := typed[rbacv1.RoleBinding](t, o)
			for _, s := range b.Subjects {
				if s.Kind == rbacv1.ServiceAccountKind && s.Namespace != elsewhere {
					t.Errorf("%s: subject %s/%s, want namespace %s", id(o), s.Namespace, s.Name, elsewhere)
				}
			}
		}
		if ns := o.GetNamespace(); ns != "" && ns != elsewhere {
			t.Errorf("%s is in namespace %s, want %s", id(o), ns, elsewhere)
		}
	}
	if bindings != 3 {
		t.Errorf("%d bindings, want spire-registrar's, its leader election's and the pod certificate signer's", bindings)
	}
}
