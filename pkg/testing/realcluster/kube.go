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

package realcluster

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
)

const (
	// AdminUser is the user name behind the admin token; it is in system:masters.
	AdminUser = "admin"
	// ServiceAccountIssuer is the issuer kube-apiserver puts in service account tokens.
	ServiceAccountIssuer = "https://kubernetes.default.svc"
	// ServiceClusterIPRange is the service CIDR kube-apiserver is started with.
	ServiceClusterIPRange = "10.0.0.0/24"

	etcdReadyTimeout      = 30 * time.Second
	apiServerReadyTimeout = 120 * time.Second
	readyPollInterval     = 100 * time.Millisecond
	apiServerStopGrace    = 15 * time.Second
	etcdStopGrace         = 10 * time.Second
)

// KubeOptions configures StartKube.
type KubeOptions struct {
	// Dir holds etcd's data, certificates, keys, logs and the kubeconfig. Any
	// etcd data already there is discarded. If empty, a temporary directory is
	// used and removed by Stop.
	Dir string
	// Logf receives progress messages (binary builds, start-up). Optional.
	Logf Logf
	// ExtraAPIServerArgs are appended to kube-apiserver's command line, so
	// they override the defaults.
	ExtraAPIServerArgs []string

	// Full selects the full world: kube-scheduler, kube-controller-manager
	// (ControllerManagerControllers) and kwok run too, and kube-apiserver
	// keeps the ServiceAccount admission plugin. Controllers then make pods,
	// the scheduler places them on the nodes made with CreateKwokNode, and
	// kwok runs them: Running and Ready with IPs, Job pods complete, graceful
	// deletes finish. Without Full (the light world, quicker to start) only
	// etcd and kube-apiserver run and objects are only stored.
	Full bool
	// ExtraSchedulerArgs, ExtraControllerManagerArgs and ExtraKwokArgs are
	// appended to those command lines in the full world.
	ExtraSchedulerArgs         []string
	ExtraControllerManagerArgs []string
	ExtraKwokArgs              []string

	// NodeAuthorization runs kube-apiserver as a cluster with kubelets runs it:
	// authorization Node,RBAC and the NodeRestriction admission plugin, so a
	// node may touch only what its own pods need. It also gives kube-apiserver
	// a client CA of the harness's own, from which NodeRESTConfig mints the
	// certificates nodes authenticate with, as kubelets do.
	NodeAuthorization bool
}

// Kube is a running etcd plus kube-apiserver on 127.0.0.1, and in the full
// world kube-scheduler, kube-controller-manager and kwok. In the light world
// neither a controller-manager, a scheduler nor a kubelet runs: objects are
// only stored.
type Kube struct {
	dir      string
	ownedDir bool
	logf     Logf

	full bool
	// clientCA is set only with KubeOptions.NodeAuthorization.
	clientCA  *clientCA
	etcd      *process
	apiServer *process
	// Only in the full world:
	scheduler         *process
	controllerManager *process
	kwok              *process

	etcdURL  string
	host     string
	token    string
	certFile string

	kubeconfig string

	mu      sync.Mutex
	caData  []byte
	stopped bool
}

// StartKube starts etcd and kube-apiserver, waits until kube-apiserver's
// /readyz passes and the default namespace exists, and writes a kubeconfig.
// In the full world it then starts kube-scheduler, kube-controller-manager
// and kwok and waits for each, and for the default namespace's "default"
// service account.
// The caller must call Stop on success; on failure StartKube has already
// stopped whatever it started.
func StartKube(ctx context.Context, opts KubeOptions) (*Kube, error) {
	names := []string{Etcd, KubeAPIServer}
	if opts.Full {
		names = append(names, KubeScheduler, KubeControllerManager, Kwok)
	}
	bins, err := Binaries(ctx, opts.Logf, names...)
	if err != nil {
		return nil, err
	}
	k := &Kube{logf: opts.Logf, full: opts.Full}
	if opts.NodeAuthorization {
		if k.clientCA, err = newClientCA(); err != nil {
			return nil, err
		}
	}
	if opts.Dir == "" {
		if k.dir, err = os.MkdirTemp("", "realcluster-kube-"); err != nil {
			return nil, fmt.Errorf("create kube dir: %w", err)
		}
		k.ownedDir = true
	} else if k.dir, err = filepath.Abs(opts.Dir); err != nil {
		return nil, fmt.Errorf("resolve kube dir: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = k.Stop()
		}
	}()
	if err := k.prepareDir(); err != nil {
		return nil, err
	}
	if err := k.startEtcd(ctx, bins[0]); err != nil {
		return nil, err
	}
	if err := k.startAPIServer(ctx, bins[1], opts.ExtraAPIServerArgs); err != nil {
		return nil, err
	}
	if opts.Full {
		if err := k.startFullWorld(ctx, bins[2], bins[3], bins[4], opts); err != nil {
			return nil, err
		}
	}
	ok = true
	return k, nil
}

// startFullWorld starts kube-scheduler, kube-controller-manager and kwok,
// then waits for the default namespace's service account, without which
// kube-apiserver refuses pods there.
func (k *Kube) startFullWorld(ctx context.Context, scheduler, controllerManager, kwok string, opts KubeOptions) error {
	if err := k.startScheduler(ctx, scheduler, opts.ExtraSchedulerArgs); err != nil {
		return err
	}
	if err := k.startControllerManager(ctx, controllerManager, opts.ExtraControllerManagerArgs); err != nil {
		return err
	}
	if err := k.startKwok(ctx, kwok, opts.ExtraKwokArgs); err != nil {
		return err
	}
	client, err := k.Client()
	if err != nil {
		return err
	}
	return WaitServiceAccount(ctx, client, metav1.NamespaceDefault, "default")
}

// NewKube starts a Kube for a test and stops it in t.Cleanup; it fails the
// test if start-up fails. On test failure the process logs' tails are logged.
func NewKube(t testing.TB, opts KubeOptions) *Kube {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	start := time.Now()
	k, err := StartKube(t.Context(), opts)
	if err != nil {
		t.Fatalf("start kube: %v", err)
	}
	what := "etcd and kube-apiserver"
	if opts.Full {
		what = "etcd, kube-apiserver, kube-scheduler, kube-controller-manager and kwok"
	}
	t.Logf("realcluster: %s ready at %s in %s", what, k.host, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s", k.LogTails(logTailLines))
		}
		if err := k.Stop(); err != nil {
			t.Errorf("stop kube: %v", err)
		}
	})
	return k
}

func (k *Kube) prepareDir() error {
	// A fresh etcd every time: a member's stored peer URL would not match new ports.
	if err := os.RemoveAll(filepath.Join(k.dir, "etcd-data")); err != nil {
		return fmt.Errorf("clear old etcd data: %w", err)
	}
	pki := filepath.Join(k.dir, "pki")
	// Drop an old self-signed serving cert too, so the kubeconfig's CA matches.
	if err := os.RemoveAll(pki); err != nil {
		return fmt.Errorf("clear old pki: %w", err)
	}
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return fmt.Errorf("create pki dir: %w", err)
	}

	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return fmt.Errorf("generate admin token: %w", err)
	}
	k.token = hex.EncodeToString(tok)
	// token,user,uid,"group1,group2"
	tokens := fmt.Sprintf("%s,%s,%s,\"system:masters\"\n", k.token, AdminUser, AdminUser)
	if err := os.WriteFile(filepath.Join(pki, "tokens.csv"), []byte(tokens), 0o600); err != nil {
		return fmt.Errorf("write token file: %w", err)
	}

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generate service account key: %w", err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(filepath.Join(pki, "sa.key"), keyPEM, 0o600); err != nil {
		return fmt.Errorf("write service account key: %w", err)
	}
	if k.clientCA != nil {
		if err := os.WriteFile(k.clientCAFile(), k.clientCA.certPEM, 0o644); err != nil {
			return fmt.Errorf("write client CA: %w", err)
		}
	}
	k.certFile = filepath.Join(pki, "apiserver.crt")
	k.kubeconfig = filepath.Join(k.dir, "kubeconfig")
	return nil
}

func (k *Kube) startEtcd(ctx context.Context, bin string) error {
	var clientURL string
	err := startOnFreePorts("etcd", func() (*process, error) {
		ports, err := freePorts(2)
		if err != nil {
			return nil, err
		}
		clientURL = "http://127.0.0.1:" + strconv.Itoa(ports[0])
		peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
		dataDir := filepath.Join(k.dir, "etcd-data")
		if err := os.RemoveAll(dataDir); err != nil {
			return nil, fmt.Errorf("clear etcd data: %w", err)
		}
		k.etcd = newProcess(Etcd, bin, filepath.Join(k.dir, "etcd.log"),
			"--name=realcluster",
			"--data-dir="+dataDir,
			"--listen-client-urls="+clientURL,
			"--advertise-client-urls="+clientURL,
			"--listen-peer-urls="+peerURL,
			"--initial-advertise-peer-urls="+peerURL,
			"--initial-cluster=realcluster="+peerURL,
			"--initial-cluster-state=new",
			// Test data need not survive a power cut; fsync dominates etcd latency.
			"--unsafe-no-fsync",
		)
		k.logf.printf("realcluster: starting etcd on %s", clientURL)
		return k.etcd, k.etcd.start()
	}, func() error {
		return waitHTTPReady(ctx, k.etcd, etcdReadyTimeout, &http.Client{Timeout: 2 * time.Second}, clientURL+"/health")
	})
	if err != nil {
		return err
	}
	k.etcdURL = clientURL
	return nil
}

func (k *Kube) apiServerArgs(port int, extra []string) []string {
	pki := filepath.Join(k.dir, "pki")
	args := []string{
		"--etcd-servers=" + k.etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		// Only kube-apiserver and etcd run: nothing should maintain the
		// kubernetes service's endpoints.
		"--endpoint-reconciler-type=none",
		// kube-apiserver self-signs apiserver.crt/.key here (cert plus its CA).
		"--cert-dir=" + pki,
		"--token-auth-file=" + filepath.Join(pki, "tokens.csv"),
		"--service-account-key-file=" + filepath.Join(pki, "sa.key"),
		"--service-account-signing-key-file=" + filepath.Join(pki, "sa.key"),
		"--service-account-issuer=" + ServiceAccountIssuer,
		"--service-cluster-ip-range=" + ServiceClusterIPRange,
		"--allow-privileged=true",
	}
	if k.clientCA != nil {
		args = append(args,
			"--authorization-mode=Node,RBAC",
			"--enable-admission-plugins=NodeRestriction",
			"--client-ca-file="+k.clientCAFile(),
		)
	} else {
		args = append(args, "--authorization-mode=RBAC")
	}
	if !k.full {
		// The ServiceAccount plugin rejects pods whose service account does
		// not exist, and without kube-controller-manager nobody creates
		// "default" in each namespace. The full world keeps it: pods made by
		// controllers get their serviceAccountName only from it.
		args = append(args, "--disable-admission-plugins=ServiceAccount")
	}
	return append(args, extra...)
}

func (k *Kube) startAPIServer(ctx context.Context, bin string, extra []string) error {
	err := startOnFreePorts("kube-apiserver", func() (*process, error) {
		ports, err := freePorts(1)
		if err != nil {
			return nil, err
		}
		k.host = "https://127.0.0.1:" + strconv.Itoa(ports[0])
		k.apiServer = newProcess(KubeAPIServer, bin, filepath.Join(k.dir, "kube-apiserver.log"), k.apiServerArgs(ports[0], extra)...)
		k.logf.printf("realcluster: starting kube-apiserver on %s", k.host)
		return k.apiServer, k.apiServer.start()
	}, func() error { return k.waitAPIServer(ctx) })
	if err != nil {
		return err
	}
	return k.writeKubeconfig()
}

// waitAPIServer waits for the self-signed cert, then /readyz, then the
// default namespace (created asynchronously by a post-start hook that
// /readyz does not cover; pods there are rejected until it exists).
func (k *Kube) waitAPIServer(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, apiServerReadyTimeout)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, readyPollInterval, true, func(context.Context) (bool, error) {
		if !k.apiServer.running() {
			return false, k.apiServer.exitErr()
		}
		ca, err := os.ReadFile(k.certFile)
		if err != nil {
			return false, nil
		}
		// The file is written non-atomically: wait for the serving cert and its CA.
		if certs, err := certutil.ParseCertsPEM(ca); err != nil || len(certs) < 2 {
			return false, nil
		}
		k.mu.Lock()
		k.caData = ca
		k.mu.Unlock()
		return true, nil
	})
	if err != nil {
		return k.readyErr("wait for kube-apiserver serving certificate", err)
	}
	cfg := k.RESTConfig()
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return fmt.Errorf("build kube-apiserver client: %w", err)
	}
	defer httpClient.CloseIdleConnections()
	httpClient.Timeout = 2 * time.Second
	if err := waitHTTPReady(ctx, k.apiServer, apiServerReadyTimeout, httpClient, k.host+"/readyz"); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return fmt.Errorf("build kube-apiserver client: %w", err)
	}
	err = wait.PollUntilContextCancel(ctx, readyPollInterval, true, func(ctx context.Context) (bool, error) {
		if !k.apiServer.running() {
			return false, k.apiServer.exitErr()
		}
		_, err := cs.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return k.readyErr("wait for the default namespace", err)
	}
	return nil
}

func (k *Kube) readyErr(what string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s: %w\n%s", what, err, k.apiServer.logTail(logTailLines))
	}
	return fmt.Errorf("%s: %w", what, err)
}

// waitHTTPReady polls url until it answers 200, failing early if p exits.
func waitHTTPReady(ctx context.Context, p *process, timeout time.Duration, client *http.Client, url string) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, readyPollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		if !p.running() {
			return false, p.exitErr()
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		last = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
		return resp.StatusCode == http.StatusOK, nil
	})
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("wait for %s %s (last: %s): %w\n%s", p.name, url, last, err, p.logTail(logTailLines))
	}
	return err
}

func (k *Kube) writeKubeconfig() error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["realcluster"] = &clientcmdapi.Cluster{Server: k.host, CertificateAuthorityData: k.ca()}
	cfg.AuthInfos[AdminUser] = &clientcmdapi.AuthInfo{Token: k.token}
	cfg.Contexts["realcluster"] = &clientcmdapi.Context{Cluster: "realcluster", AuthInfo: AdminUser, Namespace: metav1.NamespaceDefault}
	cfg.CurrentContext = "realcluster"
	if err := clientcmd.WriteToFile(*cfg, k.kubeconfig); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

func (k *Kube) ca() []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.caData
}

// RESTConfig returns a fresh admin (system:masters) config that verifies the
// serving certificate against the CA kube-apiserver generated. Rate limits
// are raised so tests are not throttled client-side.
func (k *Kube) RESTConfig() *rest.Config {
	return &rest.Config{
		Host:            k.host,
		BearerToken:     k.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: k.ca()},
		QPS:             200,
		Burst:           400,
	}
}

// Client returns an admin clientset for RESTConfig.
func (k *Kube) Client() (kubernetes.Interface, error) {
	cs, err := kubernetes.NewForConfig(k.RESTConfig())
	if err != nil {
		return nil, fmt.Errorf("build clientset: %w", err)
	}
	return cs, nil
}

// Kubeconfig returns the path of a kubeconfig file for the admin user.
func (k *Kube) Kubeconfig() string { return k.kubeconfig }

// Host returns kube-apiserver's URL, https://127.0.0.1:<port>.
func (k *Kube) Host() string { return k.host }

// EtcdURL returns etcd's client URL.
func (k *Kube) EtcdURL() string { return k.etcdURL }

// Dir returns the directory holding data, logs and the kubeconfig.
func (k *Kube) Dir() string { return k.dir }

// LogTails returns the last n lines of each component's log, for failure
// reports.
func (k *Kube) LogTails(n int) string {
	var tails []string
	for _, p := range k.processes() {
		tails = append(tails, p.logTail(n))
	}
	return strings.Join(tails, "\n")
}

// processes lists the components started so far, in start order.
func (k *Kube) processes() []*process {
	var out []*process
	for _, p := range []*process{k.etcd, k.apiServer, k.scheduler, k.controllerManager, k.kwok} {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}

// Full reports whether this is the full world (see KubeOptions.Full).
func (k *Kube) Full() bool { return k.full }

// StopAPIServer stops kube-apiserver (SIGTERM, then SIGKILL after a grace
// period) and leaves etcd running, for tests of an unreachable API server.
func (k *Kube) StopAPIServer() {
	k.apiServer.stop(apiServerStopGrace)
}

// StartAPIServer starts kube-apiserver again after StopAPIServer, on the same
// port with the same certificates and data, and waits until it is ready.
func (k *Kube) StartAPIServer(ctx context.Context) error {
	k.mu.Lock()
	stopped := k.stopped
	k.mu.Unlock()
	if stopped {
		return errors.New("kube has been stopped")
	}
	if err := k.apiServer.start(); err != nil {
		return err
	}
	if err := k.waitAPIServer(ctx); err != nil {
		return fmt.Errorf("restart kube-apiserver: %w", err)
	}
	return nil
}

// Restart restarts kube-apiserver only; etcd and so all objects are kept, and
// the full world's other components reconnect on their own.
func (k *Kube) Restart(ctx context.Context) error {
	k.StopAPIServer()
	return k.StartAPIServer(ctx)
}

// Stop stops every component (kwok, kube-controller-manager, kube-scheduler,
// kube-apiserver, etcd) and removes the directory if StartKube created it.
// It is safe to call more than once.
func (k *Kube) Stop() error {
	k.mu.Lock()
	if k.stopped {
		k.mu.Unlock()
		return nil
	}
	k.stopped = true
	k.mu.Unlock()
	// The clients of kube-apiserver first, so that none logs its going away.
	for _, p := range []*process{k.kwok, k.controllerManager, k.scheduler} {
		if p != nil {
			p.stop(controlPlaneStopGrace)
		}
	}
	if k.apiServer != nil {
		k.apiServer.stop(apiServerStopGrace)
	}
	if k.etcd != nil {
		k.etcd.stop(etcdStopGrace)
	}
	if k.ownedDir {
		if err := os.RemoveAll(k.dir); err != nil {
			return fmt.Errorf("remove kube dir: %w", err)
		}
	}
	return nil
}
