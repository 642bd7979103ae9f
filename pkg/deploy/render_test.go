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

package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/spire-registrar/spire-registrar/pkg/deploy"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// writeTree writes files (path → content) under a temporary directory and returns it.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// kubectlPath returns the real kubectl, or "" under -short, when the comparison is skipped.
func kubectlPath(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		return ""
	}
	kubectl, err := realcluster.Binary(t.Context(), t.Logf, realcluster.Kubectl)
	if err != nil {
		t.Fatal(err)
	}
	return kubectl
}

const rbacBase = `apiVersion: v1
kind: ServiceAccount
metadata:
  name: sa
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: follows
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: r}
subjects:
- {kind: ServiceAccount, name: sa}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: explicit
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: r}
subjects:
- {kind: ServiceAccount, name: sa, namespace: a}
- {kind: ServiceAccount, name: elsewhere, namespace: a}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: local
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: r}
subjects:
- {kind: ServiceAccount, name: sa}
`

const webDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: x
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: main, image: main:1}
`

// TestRender runs Render on small kustomizations covering each supported feature and each
// refusal, and checks it agrees with `kubectl kustomize` on them.
func TestRender(t *testing.T) {
	kubectl := kubectlPath(t)
	for _, tc := range []struct {
		name  string
		files map[string]string
		// dir is the kustomization to render, relative to the tree.
		dir string
		// check inspects a successful render; wantErr is a substring of the expected error.
		check   func(t *testing.T, objs []*unstructured.Unstructured)
		wantErr string
		// kubectlAccepts is set where Render refuses what kustomize supports.
		kubectlAccepts bool
	}{
		{
			name: "namespace transformer",
			files: map[string]string{
				"kustomization.yaml": "namespace: team\nresources: [objs.yaml]\n",
				"objs.yaml": `# a comment-only document first
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: r}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c, namespace: other}
data: {n: "1"}
---
apiVersion: spire.spiffe.io/v1alpha1
kind: ClusterSPIFFEID
metadata: {name: id}
spec: {spiffeIDTemplate: x}
`,
			},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				// kustomize does not know ClusterSPIFFEID is cluster-scoped; neither does Render.
				want := []string{"ClusterRole /r", "ClusterSPIFFEID team/id", "ConfigMap team/c"}
				if got := ids(objs); !slices.Equal(got, want) {
					t.Errorf("got %v, want %v", got, want)
				}
				// YAML 1.2, as kustomize: the key n is a string, not false.
				if v, _, _ := unstructured.NestedString(find(t, objs, "ConfigMap", "c").Object, "data", "n"); v != "1" {
					t.Errorf("ConfigMap data = %v, want n: \"1\"", find(t, objs, "ConfigMap", "c").Object["data"])
				}
			},
		},
		{
			name: "overlay moves ServiceAccount and subjects",
			files: map[string]string{
				"base/kustomization.yaml":    "namespace: a\nresources: [rbac.yaml]\n",
				"base/rbac.yaml":             rbacBase,
				"overlay/kustomization.yaml": "namespace: b\nresources: [../base]\n",
			},
			dir: "overlay",
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				subjects := func(name string) []string {
					var out []string
					i := slices.IndexFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetName() == name })
					if i < 0 {
						t.Fatalf("no binding %s", name)
					}
					s, _, _ := unstructured.NestedSlice(objs[i].Object, "subjects")
					for _, v := range s {
						m := v.(map[string]any)
						out = append(out, m["name"].(string)+"@"+m["namespace"].(string))
					}
					return out
				}
				if got := subjects("follows"); !slices.Equal(got, []string{"sa@b"}) {
					t.Errorf("subjects naming the ServiceAccount = %v, want it followed to b", got)
				}
				// Explicit namespaces are not the ServiceAccount's original one: kept.
				if got := subjects("explicit"); !slices.Equal(got, []string{"sa@a", "elsewhere@a"}) {
					t.Errorf("explicit subjects = %v, want them kept", got)
				}
				if got := subjects("local"); !slices.Equal(got, []string{"sa@b"}) {
					t.Errorf("RoleBinding subjects = %v", got)
				}
			},
		},
		{
			name: "component with target and plain patches",
			files: map[string]string{
				"app/kustomization.yaml": "resources: [deploy.yaml]\ncomponents: [../sidecar]\n",
				"app/deploy.yaml":        webDeployment,
				"sidecar/kustomization.yaml": `apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
resources: [cm.yaml]
patches:
- path: patch.yaml
  target: {group: apps, kind: Deployment, name: "we.*"}
- patch: |
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: web, namespace: x}
    spec: {replicas: 3}
`,
				"sidecar/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: side}\n",
				"sidecar/patch.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: any}
spec:
  template:
    spec:
      containers:
      - {name: side, image: side:1}
      - {name: main, args: [--x]}
      volumes:
      - {name: v, emptyDir: {}}
`,
			},
			dir: "app",
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				d := find(t, objs, "Deployment", "web")
				cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
				var names []string
				for _, c := range cs {
					names = append(names, c.(map[string]any)["name"].(string))
				}
				slices.Sort(names)
				if !slices.Equal(names, []string{"main", "side"}) {
					t.Errorf("containers %v, want main merged and side added", names)
				}
				if r, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas"); r != 3 {
					t.Errorf("replicas = %d, want 3 from the plain patch", r)
				}
				find(t, objs, "ConfigMap", "side")
			},
		},
		{
			name: "unsupported field",
			files: map[string]string{
				"kustomization.yaml": "resources: [cm.yaml]\ncommonLabels: {a: b}\n",
				"cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
			},
			wantErr:        "commonLabels",
			kubectlAccepts: true,
		},
		{
			name: "patch without target matching nothing",
			files: map[string]string{
				"kustomization.yaml": "resources: [deploy.yaml]\npatches:\n- patch: |\n    apiVersion: apps/v1\n    kind: Deployment\n    metadata: {name: web}\n    spec: {replicas: 2}\n",
				"deploy.yaml":        webDeployment,
			},
			wantErr: "no object matches",
		},
		{
			name: "duplicate object",
			files: map[string]string{
				"kustomization.yaml": "resources: [a.yaml, b.yaml]\n",
				"a.yaml":             "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
				"b.yaml":             "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
			},
			wantErr: "defined twice",
		},
		{
			name: "component used as a resource",
			files: map[string]string{
				"kustomization.yaml":      "resources: [comp]\n",
				"comp/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n",
			},
			wantErr: "kind Component",
		},
		{
			name: "cycle",
			files: map[string]string{
				"a/kustomization.yaml": "resources: [../b]\n",
				"b/kustomization.yaml": "resources: [../a]\n",
			},
			dir:     "a",
			wantErr: "cycle",
		},
		{
			name:    "no kustomization",
			files:   map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"},
			wantErr: "no kustomization file",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(writeTree(t, tc.files), tc.dir)
			objs, err := deploy.Render(dir)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Render error = %v, want one mentioning %q", err, tc.wantErr)
				}
				if kubectl != "" && !tc.kubectlAccepts {
					if out, err := exec.CommandContext(t.Context(), kubectl, "kustomize", dir).CombinedOutput(); err == nil {
						t.Errorf("kubectl kustomize accepts what Render refuses:\n%s", out)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			tc.check(t, objs)
			if kubectl != "" {
				assertSameAsKubectl(t, kubectl, dir, objs)
			}
		})
	}
}
