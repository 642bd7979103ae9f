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
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/spire-registrar/spire-registrar/pkg/config"
)

const (
	image           = "ghcr.io/spire-registrar/spire-registrar:v0.1.0"
	nonRootUID      = int64(65532)
	configMountPath = "/etc/spire-registrar"
	// socketVolume is the volume holding the SPIRE server's admin socket, in both topologies.
	socketVolume = "spire-server-socket"
	// spiffeCSIDriver mounts a SPIRE agent's Workload API socket into pods.
	spiffeCSIDriver = "csi.spiffe.io"
)

// id names an object as kustomize does: kind, namespace and name.
func id(o *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
}

func ids(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, id(o))
	}
	slices.Sort(out)
	return out
}

// find returns the object of the kind and name, failing the test if there is not exactly one.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	var found *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			if found != nil {
				t.Fatalf("two objects %s %s", kind, name)
			}
			found = o
		}
	}
	if found == nil {
		t.Fatalf("no %s %s among %v", kind, name, ids(objs))
	}
	return found
}

// typed converts an object to its Go type.
func typed[T any](t *testing.T, o *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, out, true); err != nil {
		t.Fatalf("%s: %v", id(o), err)
	}
	return out
}

// TestStandaloneManifests checks what `kubectl apply -k manifests/` creates.
func TestStandaloneManifests(t *testing.T) {
	objs := kustomize(t, "manifests")
	checkOwnDeploymentTopology(t, objs, "manifests/")
}

// deploymentTopologyObjects are what a topology with its own Deployment creates.
var deploymentTopologyObjects = []string{
	"ClusterRole /spire-registrar",
	"ClusterRoleBinding /spire-registrar",
	"ConfigMap spire-server/spire-registrar",
	"CustomResourceDefinition /clusterfederatedtrustdomains.spire.spiffe.io",
	"CustomResourceDefinition /clusterspiffeids.spire.spiffe.io",
	"CustomResourceDefinition /clusterstaticentries.spire.spiffe.io",
	"Deployment spire-server/spire-registrar",
	"Role spire-server/spire-registrar-leader-election",
	"RoleBinding spire-server/spire-registrar-leader-election",
	"ServiceAccount spire-server/spire-registrar",
}

// checkOwnDeploymentTopology checks the objects of a topology where spire-registrar is its own
// Deployment: exactly deploymentTopologyObjects, with the bindings and rules it needs.
func checkOwnDeploymentTopology(t *testing.T, objs []*unstructured.Unstructured, what string) {
	t.Helper()
	want := deploymentTopologyObjects
	if got := ids(objs); !slices.Equal(got, want) {
		t.Fatalf("%s renders\n  %s\nwant\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}

	// Both bindings grant their role to the ServiceAccount the Deployment runs as.
	sa := subject(namespace, "spire-registrar")
	crb := typed[rbacv1.ClusterRoleBinding](t, find(t, objs, "ClusterRoleBinding", "spire-registrar"))
	if diff := cmp.Diff(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "spire-registrar"}, crb.RoleRef); diff != "" {
		t.Errorf("ClusterRoleBinding roleRef (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]rbacv1.Subject{sa}, crb.Subjects); diff != "" {
		t.Errorf("ClusterRoleBinding subjects (-want +got):\n%s", diff)
	}
	rb := typed[rbacv1.RoleBinding](t, find(t, objs, "RoleBinding", "spire-registrar-leader-election"))
	if diff := cmp.Diff(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "spire-registrar-leader-election"}, rb.RoleRef); diff != "" {
		t.Errorf("RoleBinding roleRef (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]rbacv1.Subject{sa}, rb.Subjects); diff != "" {
		t.Errorf("RoleBinding subjects (-want +got):\n%s", diff)
	}
	role := typed[rbacv1.Role](t, find(t, objs, "Role", "spire-registrar-leader-election"))
	if diff := cmp.Diff(wantLeaderElectionRules, role.Rules); diff != "" {
		t.Errorf("leader election Role rules (-want +got):\n%s", diff)
	}
	clusterRole := typed[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "spire-registrar"))
	if diff := cmp.Diff(wantClusterRoleRules, clusterRole.Rules); diff != "" {
		t.Errorf("ClusterRole rules (-want +got):\n%s", diff)
	}
}

func subject(ns, name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}
}

// wantClusterRoleRules are spire-registrar's cluster-wide permissions, exactly.
var wantClusterRoleRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"pods", "namespaces", "nodes"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{"spire.spiffe.io"}, Resources: []string{"clusterspiffeids", "clusterstaticentries", "clusterfederatedtrustdomains"},
		Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{"spire.spiffe.io"}, Resources: []string{"clusterspiffeids/status", "clusterstaticentries/status", "clusterfederatedtrustdomains/status"},
		Verbs: []string{"update", "patch"}},
	{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
}

// wantLeaderElectionRules are the permissions on the Lease in spire-server, exactly: create
// (which RBAC cannot narrow by name), then read and renew its own Lease only.
var wantLeaderElectionRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
	{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{leaseName}, Verbs: []string{"get", "update"}},
}

// leaseName is the Lease the shipped config's leaderElection.resourceName names.
const leaseName = "spire-registrar"

// TestDeploymentHardening checks the standalone pod: non-root, read-only, unprivileged, with
// probes, resources and a config the binary accepts.
func TestDeploymentHardening(t *testing.T) {
	objs := kustomize(t, "manifests")
	d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", "spire-registrar"))
	spec := &d.Spec.Template.Spec
	if spec.ServiceAccountName != "spire-registrar" {
		t.Errorf("serviceAccountName = %q", spec.ServiceAccountName)
	}
	// Several replicas are safe only because exactly one holds the lease and writes.
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 || !slices.Contains(spec.Containers[0].Args, "--leader-elect=true") {
		t.Errorf("replicas %v, args %v: want >= 2 replicas under --leader-elect=true", d.Spec.Replicas, spec.Containers[0].Args)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(spec.Containers))
	}
	checkRegistrarContainer(t, objs, spec, &spec.Containers[0], "healthz")

	// The socket comes from the SPIRE server's node, which must already have it.
	v := volume(t, spec, socketVolume)
	if v.HostPath == nil || v.HostPath.Type == nil || *v.HostPath.Type != corev1.HostPathDirectory {
		t.Errorf("socket volume = %+v, want a hostPath of type Directory", v.VolumeSource)
	}
	if a := spec.Affinity; a == nil || a.PodAffinity == nil || len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 ||
		a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey != corev1.LabelHostname {
		t.Errorf("affinity = %+v, want a required pod affinity to the SPIRE server's node", a)
	}
}

// TestSidecarComponent renders the sidecar component onto a StatefulSet shaped like SPIRE's
// Helm charts' and checks the added container and that nothing else of the pod changed.
func TestSidecarComponent(t *testing.T) {
	objs := kustomize(t, "test", "manifests", "testdata", "sidecar")
	base := kustomize(t, "test", "manifests", "testdata", "sidecar", "base")
	sts := typed[appsv1.StatefulSet](t, find(t, objs, "StatefulSet", "spire-server"))
	orig := typed[appsv1.StatefulSet](t, find(t, base, "StatefulSet", "spire-server"))
	spec := &sts.Spec.Template.Spec

	if n := len(spec.Containers); n != 2 {
		t.Fatalf("%d containers, want the server's and spire-registrar", n)
	}
	if diff := cmp.Diff(orig.Spec.Template.Spec.Containers[0], *container(t, spec, "spire-server")); diff != "" {
		t.Errorf("the server container changed (-was +now):\n%s", diff)
	}
	if diff := cmp.Diff(orig.Spec.Template.Spec.SecurityContext, spec.SecurityContext); diff != "" {
		t.Errorf("the pod's security context changed (-was +now):\n%s", diff)
	}
	if spec.ServiceAccountName != "spire-server" {
		t.Errorf("serviceAccountName = %q, want the server's spire-server", spec.ServiceAccountName)
	}
	checkRegistrarContainer(t, objs, spec, container(t, spec, "spire-registrar"), "reg-healthz")
	// The socket volume is still the one emptyDir the server writes to.
	if v := volume(t, spec, socketVolume); v.EmptyDir == nil || v.HostPath != nil {
		t.Errorf("socket volume = %+v, want the pod's emptyDir", v.VolumeSource)
	}
	if n, was := len(spec.Volumes), len(orig.Spec.Template.Spec.Volumes); n != was+1 {
		t.Errorf("%d volumes, want the %d of the server plus the config", n, was)
	}

	// The pod's ServiceAccount gets spire-registrar's roles.
	crb := typed[rbacv1.ClusterRoleBinding](t, find(t, objs, "ClusterRoleBinding", "spire-registrar-sidecar"))
	serverSA := []rbacv1.Subject{subject(namespace, "spire-server")}
	if diff := cmp.Diff(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "spire-registrar"}, crb.RoleRef); diff != "" {
		t.Errorf("sidecar ClusterRoleBinding roleRef (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(serverSA, crb.Subjects); diff != "" {
		t.Errorf("sidecar ClusterRoleBinding subjects (-want +got):\n%s", diff)
	}
	rb := typed[rbacv1.RoleBinding](t, find(t, objs, "RoleBinding", "spire-registrar-sidecar-leader-election"))
	if rb.Namespace != namespace {
		t.Errorf("sidecar RoleBinding is in namespace %q, want %s", rb.Namespace, namespace)
	}
	if diff := cmp.Diff(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "spire-registrar-leader-election"}, rb.RoleRef); diff != "" {
		t.Errorf("sidecar RoleBinding roleRef (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(serverSA, rb.Subjects); diff != "" {
		t.Errorf("sidecar RoleBinding subjects (-want +got):\n%s", diff)
	}
}

// checkRegistrarContainer checks the spire-registrar container of either topology and the
// config it is given.
func checkRegistrarContainer(t *testing.T, objs []*unstructured.Unstructured, pod *corev1.PodSpec, c *corev1.Container, healthPort string) {
	t.Helper()
	if c.Image != image || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("image %q pull policy %q", c.Image, c.ImagePullPolicy)
	}
	for _, arg := range []string{"--config=" + configMountPath + "/config.yaml", "--health-probe-bind-address=:8083", "--metrics-bind-address=:8082"} {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("args %q lack %s", c.Args, arg)
		}
	}

	// Security: the container's settings win over the pod's.
	sc := c.SecurityContext
	if sc == nil {
		t.Fatalf("container %s has no securityContext", c.Name)
	}
	psc := pod.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	runAsNonRoot, runAsUser := firstSet(sc.RunAsNonRoot, psc.RunAsNonRoot), firstSet(sc.RunAsUser, psc.RunAsUser)
	if runAsNonRoot == nil || !*runAsNonRoot || runAsUser == nil || *runAsUser != nonRootUID {
		t.Errorf("runAsNonRoot %v runAsUser %v, want true and %d", deref(runAsNonRoot), deref(runAsUser), nonRootUID)
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("readOnlyRootFilesystem is not true")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("allowPrivilegeEscalation is not false")
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Errorf("privileged")
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
		t.Errorf("capabilities = %+v, want drop ALL and add nothing", sc.Capabilities)
	}
	seccomp := firstSet(sc.SeccompProfile, psc.SeccompProfile)
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("seccompProfile = %+v, want RuntimeDefault", seccomp)
	}
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		t.Errorf("the pod shares a host namespace")
	}

	for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, lim := c.Resources.Requests[res], c.Resources.Limits[res]
		if req.IsZero() || lim.IsZero() || req.Cmp(lim) > 0 {
			t.Errorf("%s request %s limit %s: want both, request <= limit", res, req.String(), lim.String())
		}
	}

	// Probes: /healthz and /readyz on the health port 8083, next to metrics on 8082.
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports[healthPort] != 8083 || !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.ContainerPort == 8082 }) {
		t.Errorf("ports = %+v, want %s=8083 and 8082", c.Ports, healthPort)
	}
	for _, probe := range []struct {
		name string
		p    *corev1.Probe
		path string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if probe.p == nil || probe.p.HTTPGet == nil {
			t.Errorf("no HTTP %s probe", probe.name)
			continue
		}
		port := probe.p.HTTPGet.Port
		if port.Type == intstr.String {
			port = intstr.FromInt32(ports[port.StrVal])
		}
		if probe.p.HTTPGet.Path != probe.path || port.IntVal != 8083 {
			t.Errorf("%s probe = %s on %s, want %s on 8083", probe.name, probe.p.HTTPGet.Path, probe.p.HTTPGet.Port.String(), probe.path)
		}
	}

	// The config: the ConfigMap in the build, mounted read-only where --config points, valid
	// for the binary, and naming a socket in the read-only socket mount.
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
		if !m.ReadOnly {
			t.Errorf("mount %s is writable", m.MountPath)
		}
	}
	configMount, ok := mounts[configMountPath]
	if !ok {
		t.Fatalf("nothing mounted at %s", configMountPath)
	}
	cmVolume := volume(t, pod, configMount.Name)
	if cmVolume.ConfigMap == nil {
		t.Fatalf("%s is not a ConfigMap volume", configMount.Name)
	}
	cm := typed[corev1.ConfigMap](t, find(t, objs, "ConfigMap", cmVolume.ConfigMap.Name))
	cfg, err := config.Parse([]byte(cm.Data["config.yaml"]))
	if err != nil {
		t.Fatalf("ConfigMap %s: config.yaml is refused by spire-registrar: %v", cm.Name, err)
	}
	if cfg.SPIREServerAddress != "" {
		// Over TCP with mTLS: the agent's Workload API socket, in a read-only mount of the
		// SPIFFE CSI driver's volume.
		socketPath := strings.TrimPrefix(cfg.WorkloadAPIAddress, "unix://")
		m, ok := mounts[path.Dir(socketPath)]
		if !ok {
			t.Fatalf("workloadAPISocketPath %s is in no mount (mounts: %+v)", socketPath, c.VolumeMounts)
		}
		if v := volume(t, pod, m.Name); v.CSI == nil || v.CSI.Driver != spiffeCSIDriver || v.CSI.ReadOnly == nil || !*v.CSI.ReadOnly {
			t.Errorf("Workload API volume %s = %+v, want a read-only %s CSI volume", m.Name, v.VolumeSource, spiffeCSIDriver)
		}
		return
	}
	socketMount, ok := mounts[path.Dir(cfg.SPIREServerSocketPath)]
	if !ok || socketMount.Name != socketVolume {
		t.Errorf("spireServerSocketPath %s is not in the %s mount (mounts: %+v)", cfg.SPIREServerSocketPath, socketVolume, c.VolumeMounts)
	}
}

func container(t *testing.T, pod *corev1.PodSpec, name string) *corev1.Container {
	t.Helper()
	for i := range pod.Containers {
		if pod.Containers[i].Name == name {
			return &pod.Containers[i]
		}
	}
	t.Fatalf("no container %s", name)
	return nil
}

func volume(t *testing.T, pod *corev1.PodSpec, name string) *corev1.Volume {
	t.Helper()
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == name {
			return &pod.Volumes[i]
		}
	}
	t.Fatalf("no volume %s", name)
	return nil
}

func firstSet[T any](vs ...*T) *T {
	for _, v := range vs {
		if v != nil {
			return v
		}
	}
	return nil
}

func deref[T any](v *T) any {
	if v == nil {
		return nil
	}
	return *v
}
