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

package image_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// chartContainer is the controller manager's container as the chart's
// _controller-manager-container.tpl renders it, with the chart's recommended container
// security context (global.spire.recommendations): read-only root, every capability dropped,
// no privilege escalation. The pod's volumes are host directories, and the pod network is the
// host's, where the real kube-apiserver and spire-server listen on loopback.
type chartContainer struct {
	name string
	// user and fsGroup are the pod's runAsUser:runAsGroup and fsGroup; an empty user runs
	// the image's USER, as a pod without a security context does.
	user    string
	fsGroup string
	env     []string
	// mounts are host path → container path, read-only unless the container path ends in :rw.
	mounts [][2]string
	args   []string
}

// start runs the container detached; its logs are printed if the test fails.
func (c chartContainer) start(t *testing.T, ctx context.Context, p *podman, image string) {
	t.Helper()
	args := []string{"run", "--detach", "--name", c.name, "--network", "host",
		"--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges"}
	if c.user != "" {
		args = append(args, "--user", c.user)
	}
	if c.fsGroup != "" {
		args = append(args, "--group-add", c.fsGroup)
	}
	for _, e := range c.env {
		args = append(args, "--env", e)
	}
	for _, m := range c.mounts {
		target, rw := strings.CutSuffix(m[1], ":rw")
		opt := ":ro"
		if rw {
			opt = ":rw"
		}
		args = append(args, "--volume", m[0]+":"+target+opt)
	}
	args = append(append(args, image), c.args...)
	if _, err := p.run(ctx, args...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s logs:\n%s", c.name, p.logs(c.name))
		}
		if _, err := p.run(context.Background(), "rm", "--force", "--time", "5", c.name); err != nil {
			t.Logf("remove container: %v", err)
		}
	})
}

// fsGroupShare gives gid access to paths the way the kubelet's fsGroup does for a pod's
// volumes: group ownership and group permissions, no change for others.
func fsGroupShare(t *testing.T, gid string, paths ...string) {
	t.Helper()
	g, err := strconv.Atoi(gid)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, -1, g); err != nil {
			t.Fatal(err)
		}
		mode := info.Mode().Perm() | 0o060
		if info.IsDir() {
			mode |= 0o010
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
}

// writeVolumeFile writes a file of a ConfigMap or Secret volume: readable by all, as the
// kubelet's default mode 0644 leaves it.
func writeVolumeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// emptyDir returns a directory as the kubelet makes an emptyDir: writable by every uid.
func emptyDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestImageUnderTheChart builds the image with hack/build-image.sh and runs it as the official
// SPIRE Helm chart runs spire-controller-manager's: the chart's args (a relative
// --config=controller-manager-config.yaml, --kubeconfig=/kubeconfigs/<cluster> and --expand-env
// for an external cluster), its env (ENABLE_WEBHOOKS), the config mounted by subPath at /, /tmp
// as an emptyDir, the SPIRE server's socket directory at /tmp/spire-server/private, its ports
// (metrics 8082, health 8083, webhook 9443; 8084 and 8085 for the first external cluster), a
// read-only root filesystem and no capabilities, once as the image's user with in-cluster
// credentials and once as uid 1000 with the chart's recommended pod security context. Each
// container must become ready, take its Lease, give a pod its entry under its entryIDPrefix and
// serve /metrics; the main one must also answer admission through the real API server.
func TestImageUnderTheChart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the image and runs it with podman against the real kube-apiserver and spire-server")
	}
	p, image, _ := imageForTest(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	cfg, err := p.inspect(ctx, image)
	if err != nil {
		t.Fatal(err)
	}
	// The chart passes a relative --config and mounts the file at /; the chart's
	// recommendations and OpenShift run the container as another uid.
	if cfg.WorkingDir != "/" {
		t.Errorf("image WorkingDir %q, want / (the chart's --config=controller-manager-config.yaml is relative)", cfg.WorkingDir)
	}
	if uid, _, _ := strings.Cut(cfg.User, ":"); uid == "" || uid == "0" || uid == "root" {
		t.Errorf("image User %q, want a non-root uid", cfg.User)
	}
	if !slices.Equal(cfg.Entrypoint, []string{"/spire-registrar"}) || len(cfg.Cmd) != 0 {
		t.Errorf("image Entrypoint %q Cmd %q, want [/spire-registrar] and no Cmd (the chart gives args only)", cfg.Entrypoint, cfg.Cmd)
	}

	stack := realcluster.NewStackWith(t, realcluster.StackOptions{SCMCRDs: true})
	if err := realcluster.EnsureNamespace(ctx, stack.Client, realcluster.ChartNamespace); err != nil {
		t.Fatal(err)
	}
	node, err := realcluster.CreateNode(ctx, stack.Client, "chart-node")
	if err != nil {
		t.Fatal(err)
	}
	if err := realcluster.EnsureNamespace(ctx, stack.Client, "shop"); err != nil {
		t.Fatal(err)
	}
	if _, err := realcluster.CreatePod(ctx, stack.Client, "shop", "web", node.Name); err != nil {
		t.Fatal(err)
	}
	if err := realcluster.RegisterChartWebhooks(ctx, stack.Client, realcluster.ChartWebhookName, realcluster.ChartWebhookPort); err != nil {
		t.Fatal(err)
	}
	rest := stack.Kube.RESTConfig()
	apiURL, err := url.Parse(rest.Host)
	if err != nil {
		t.Fatal(err)
	}
	socketDir := filepath.Dir(stack.SPIRE.SocketPath())
	td := stack.SPIRE.TrustDomain()
	if !strings.Contains(realcluster.ChartConfig, "\ntrustDomain: example.org\n") {
		t.Fatal("realcluster.ChartConfig has no trustDomain: example.org line")
	}
	config := strings.Replace(realcluster.ChartConfig, "\ntrustDomain: example.org\n", "\ntrustDomain: "+td+"\n", 1)

	t.Run("main cluster, image user, in-cluster credentials, webhook", func(t *testing.T) {
		const gid = "65532"
		fsGroupShare(t, gid, socketDir, stack.SPIRE.SocketPath())
		volumes := t.TempDir()
		serviceAccount := filepath.Join(volumes, "serviceaccount")
		if err := os.Mkdir(serviceAccount, 0o755); err != nil {
			t.Fatal(err)
		}
		writeVolumeFile(t, serviceAccount, "token", rest.BearerToken)
		writeVolumeFile(t, serviceAccount, "ca.crt", string(rest.CAData))
		writeVolumeFile(t, serviceAccount, "namespace", realcluster.ChartNamespace)
		c := chartContainer{
			name:    "spire-controller-manager-" + strconv.FormatInt(time.Now().UnixNano(), 36),
			fsGroup: gid,
			env: []string{"ENABLE_WEBHOOKS=true",
				"KUBERNETES_SERVICE_HOST=" + apiURL.Hostname(), "KUBERNETES_SERVICE_PORT=" + apiURL.Port()},
			mounts: [][2]string{
				{socketDir, realcluster.ChartSocketDir},
				{writeVolumeFile(t, volumes, "controller-manager-config.yaml", config), "/controller-manager-config.yaml"},
				{serviceAccount, "/var/run/secrets/kubernetes.io/serviceaccount"},
				{emptyDir(t), "/tmp:rw"},
			},
			args: []string{"--config=controller-manager-config.yaml"},
		}
		start := time.Now()
		c.start(t, ctx, p, image)
		w := walk{t: t, ctx: ctx, start: start, stack: stack}
		w.ready(realcluster.ChartHealthPort)
		w.leaseHeld(realcluster.ChartLeaseName)
		w.poll("the caBundle written", func(ctx context.Context) (bool, error) {
			return realcluster.CABundlesWritten(ctx, stack.Client, realcluster.ChartWebhookName)
		})
		w.admission(td)
		w.podEntry(realcluster.ChartEntryIDPrefix, "/ns/shop/sa/default")
		w.metrics(realcluster.ChartMetricsPort)
	})

	t.Run("external cluster, uid 1000, kubeconfig, expand-env", func(t *testing.T) {
		const gid = "1000"
		fsGroupShare(t, gid, socketDir, stack.SPIRE.SocketPath())
		volumes := t.TempDir()
		kubeconfig, err := os.ReadFile(stack.Kube.Kubeconfig())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := clientcmd.Load(kubeconfig); err != nil {
			t.Fatalf("the harness's kubeconfig is not self-contained: %v", err)
		}
		// The chart's config for externalControllerManagers.clusters.cluster2: the next two
		// ports, a Lease and an entryIDPrefix of its own, no webhook; $CLUSTER_NAME comes from
		// extraEnv through --expand-env. The Lease is sha256("spire-server-spire-cluster2")[:8].
		external := config
		for old, replacement := range map[string]string{
			"bindAddress: 0.0.0.0:8082":            "bindAddress: 0.0.0.0:8084",
			"healthProbeBindAddress: 0.0.0.0:8083": "healthProbeBindAddress: 0.0.0.0:8085",
			"resourceName: 6f304bd2.spiffe.io":     "resourceName: 5091319f.spiffe.io",
			"entryIDPrefix: example-cluster":       "entryIDPrefix: ${CLUSTER_NAME}",
			"clusterName: example-cluster":         "clusterName: ${CLUSTER_NAME}",
			"validatingWebhookConfigurationName: spire-server-spire-controller-manager-webhook\n": "",
		} {
			if !strings.Contains(external, old) {
				t.Fatalf("realcluster.ChartConfig has no %q", old)
			}
			external = strings.Replace(external, old, replacement, 1)
		}
		c := chartContainer{
			name:    "spire-controller-manager-cluster2-" + strconv.FormatInt(time.Now().UnixNano(), 36),
			user:    gid + ":" + gid,
			fsGroup: gid,
			env:     []string{"ENABLE_WEBHOOKS=false", "CLUSTER_NAME=cluster2"},
			mounts: [][2]string{
				{socketDir, realcluster.ChartSocketDir},
				{writeVolumeFile(t, volumes, "controller-manager-config-cluster2.yaml", external), "/controller-manager-config-cluster2.yaml"},
				{writeVolumeFile(t, volumes, "cluster2", string(kubeconfig)), "/kubeconfigs/cluster2"},
				{emptyDir(t), "/tmp:rw"},
			},
			args: []string{"--kubeconfig=/kubeconfigs/cluster2", "--config=controller-manager-config-cluster2.yaml", "--expand-env"},
		}
		start := time.Now()
		c.start(t, ctx, p, image)
		w := walk{t: t, ctx: ctx, start: start, stack: stack}
		w.ready(realcluster.ChartHealthPort + 2)
		w.leaseHeld("5091319f.spiffe.io")
		w.podEntry("cluster2", "/ns/shop/sa/default")
		w.metrics(realcluster.ChartMetricsPort + 2)
	})
}

// walk checks, step by step, what a user checks after deploying: each step is polled and its
// time since the container started is logged.
type walk struct {
	t     *testing.T
	ctx   context.Context
	start time.Time
	stack *realcluster.Stack
}

func (w walk) poll(what string, cond func(context.Context) (bool, error)) {
	w.t.Helper()
	if err := wait.PollUntilContextTimeout(w.ctx, 100*time.Millisecond, 90*time.Second, true, cond); err != nil {
		w.t.Fatalf("%s: %v", what, err)
	}
	w.t.Logf("container start to %s: %v", what, time.Since(w.start).Round(time.Millisecond))
}

func (w walk) ready(port int) {
	w.t.Helper()
	w.poll(fmt.Sprintf("/readyz answering 200 on port %d", port), func(context.Context) (bool, error) {
		code, _ := get(fmt.Sprintf("http://127.0.0.1:%d/readyz", port))
		return code == http.StatusOK, nil
	})
}

func (w walk) leaseHeld(name string) {
	w.t.Helper()
	w.poll("the Lease "+name+" held", func(ctx context.Context) (bool, error) {
		lease, err := w.stack.Client.CoordinationV1().Leases(realcluster.ChartNamespace).Get(ctx, name, metav1.GetOptions{})
		return err == nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "", nil
	})
}

// admission creates, through the API server, a ClusterSPIFFEID the webhook must admit and one
// it must deny.
func (w walk) admission(td string) {
	w.t.Helper()
	good := &spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"spire.spiffe.io/class-name": realcluster.ChartClassName}},
		Spec: spirev1alpha1.ClusterSPIFFEIDSpec{
			ClassName:        realcluster.ChartClassName,
			SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/sa/{{ .PodSpec.ServiceAccountName }}",
			PodSelector:      &metav1.LabelSelector{},
		},
	}
	w.poll("a valid ClusterSPIFFEID admitted", func(ctx context.Context) (bool, error) {
		_, err := w.stack.SpireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, good, metav1.CreateOptions{})
		return err == nil, nil
	})
	_, err := w.stack.SpireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(w.ctx, &spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: "typo"},
		Spec:       spirev1alpha1.ClusterSPIFFEIDSpec{ClassName: realcluster.ChartClassName, SPIFFEIDTemplate: "spiffe://" + td + "/{{ .PodMeta.Tier }}"},
	}, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "denied the request") || !strings.Contains(err.Error(), "spec.spiffeIDTemplate") {
		w.t.Errorf("a template naming an unknown field: %v, want it denied by the webhook naming spec.spiffeIDTemplate", err)
	}
}

// podEntry waits for SPIRE to hold an entry for path whose ID carries prefix.
func (w walk) podEntry(prefix, path string) {
	w.t.Helper()
	w.poll("the pod's entry in SPIRE under entryIDPrefix "+prefix, func(ctx context.Context) (bool, error) {
		out, err := w.stack.SPIRE.CLI(ctx, "entry show", "-output", "json")
		if err != nil {
			return false, nil
		}
		var shown struct {
			Entries []struct {
				ID       string `json:"id"`
				SPIFFEID struct {
					Path string `json:"path"`
				} `json:"spiffe_id"`
			} `json:"entries"`
		}
		if err := json.Unmarshal(out, &shown); err != nil {
			return false, err
		}
		for _, e := range shown.Entries {
			if e.SPIFFEID.Path == path && strings.HasPrefix(e.ID, prefix+".") {
				return true, nil
			}
		}
		return false, nil
	})
}

// metrics checks /metrics answers with spire-registrar's own series.
func (w walk) metrics(port int) {
	w.t.Helper()
	w.poll(fmt.Sprintf("/metrics serving spire_registrar_ series on port %d", port), func(context.Context) (bool, error) {
		code, body := get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
		return code == http.StatusOK && strings.Contains(body, "spire_registrar_spire_requests_total"), nil
	})
}

// get returns the status code and body of a GET, or 0 when the request failed.
func get(u string) (int, string) {
	client := http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(u)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(body)
}
