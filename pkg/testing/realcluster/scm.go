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
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

const (
	// SCMClusterName is the clusterName StartSCM configures unless told otherwise.
	SCMClusterName = "realcluster"
	// SCMConfigFile is the name of the config file StartSCM writes in its directory.
	SCMConfigFile = "controller-manager-config.yaml"

	scmReadyTimeout = 60 * time.Second
	scmStopGrace    = 15 * time.Second
)

// SCMCRDsDir returns the directory of spire-controller-manager v0.7.0's own
// CRDs in the Go module cache (config/crd/bases of SCMModule), to install
// with ApplyCRDs instead of ours, as the official Helm chart's CRD chart does.
func SCMCRDsDir(ctx context.Context) (string, error) {
	dir, err := ModuleDir(ctx, SCMModule)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "config", "crd", "bases"), nil
}

// SCMConfig holds the commonest fields of spire-controller-manager's
// ControllerManagerConfig; Extra carries any other top-level field verbatim
// (e.g. "reconcile", "leaderElection", "parentIDTemplate"). Outside a
// cluster, leader election needs leaderElection.resourceNamespace: there is
// no service account namespace file to default it from.
type SCMConfig struct {
	ClusterName      string         `json:"clusterName,omitempty"`
	ClusterDomain    string         `json:"clusterDomain,omitempty"`
	TrustDomain      string         `json:"trustDomain,omitempty"`
	IgnoreNamespaces []string       `json:"ignoreNamespaces,omitempty"`
	EntryIDPrefix    string         `json:"entryIDPrefix,omitempty"`
	ClassName        string         `json:"className,omitempty"`
	WatchClassless   bool           `json:"watchClassless,omitempty"`
	GCInterval       time.Duration  `json:"gcInterval,omitempty"`
	LogLevel         string         `json:"logLevel,omitempty"`
	Extra            map[string]any `json:"-"`
}

// SCMOptions configures StartSCM.
type SCMOptions struct {
	// Kubeconfig is the kubeconfig it talks to kube-apiserver with, e.g.
	// Kube.Kubeconfig(). Required.
	Kubeconfig string
	// SPIRE is the server whose socket it uses, unless the config names one.
	// Required unless the config sets spireServerSocketPath.
	SPIRE *SPIRE
	// Config is the configuration to write, unless ConfigYAML is set.
	Config SCMConfig
	// ConfigYAML, if set, is the ControllerManagerConfig to write instead of
	// Config, e.g. the official chart's.
	ConfigYAML []byte
	// Whichever is used, fields left unset are filled in: apiVersion and
	// kind, clusterName (SCMClusterName), clusterDomain (cluster.local, so
	// that it does not ask DNS), trustDomain and spireServerSocketPath (from
	// SPIRE), and health and metrics addresses on free loopback ports.

	// Args are appended to --config=<file> and --kubeconfig=<file>.
	Args []string
	// Env is added to the environment. ENABLE_WEBHOOKS=false is set unless
	// Env sets ENABLE_WEBHOOKS: its webhook works only inside a cluster.
	Env []string
	// Dir holds the config file and the log, and is the working directory.
	// If empty, a temporary directory is used and removed by Stop.
	Dir string
	// Logf receives progress messages. Optional.
	Logf Logf
}

// SCM is a running spire-controller-manager v0.7.0.
type SCM struct {
	dir        string
	ownedDir   bool
	configPath string
	readyURL   string
	metricsURL string
	proc       *process

	mu      sync.Mutex
	stopped bool
}

// StartSCM writes the config, starts spire-controller-manager and waits
// until its readiness endpoint answers. The caller must call Stop on
// success; on failure StartSCM has already cleaned up.
func StartSCM(ctx context.Context, opts SCMOptions) (*SCM, error) {
	if opts.Kubeconfig == "" {
		return nil, errors.New("StartSCM needs a kubeconfig")
	}
	bin, err := Binary(ctx, opts.Logf, SpireControllerManager)
	if err != nil {
		return nil, err
	}
	s := &SCM{}
	if opts.Dir == "" {
		if s.dir, err = os.MkdirTemp("", "realcluster-scm-"); err != nil {
			return nil, fmt.Errorf("create spire-controller-manager dir: %w", err)
		}
		s.ownedDir = true
	} else {
		if s.dir, err = filepath.Abs(opts.Dir); err != nil {
			return nil, fmt.Errorf("resolve spire-controller-manager dir: %w", err)
		}
		if err := os.MkdirAll(s.dir, 0o755); err != nil {
			return nil, fmt.Errorf("create spire-controller-manager dir: %w", err)
		}
	}
	ok := false
	defer func() {
		if !ok {
			_ = s.Stop()
		}
	}()
	s.configPath = filepath.Join(s.dir, SCMConfigFile)
	env := os.Environ()
	if !hasEnv(opts.Env, "ENABLE_WEBHOOKS") {
		env = append(env, "ENABLE_WEBHOOKS=false")
	}
	env = append(env, opts.Env...)

	err = startOnFreePorts("spire-controller-manager", func() (*process, error) {
		config, err := scmConfig(opts)
		if err != nil {
			return nil, err
		}
		if s.readyURL, s.metricsURL, err = s.writeConfig(config); err != nil {
			return nil, err
		}
		args := append([]string{"--config=" + s.configPath, "--kubeconfig=" + opts.Kubeconfig}, opts.Args...)
		s.proc = newProcess(SpireControllerManager, bin, filepath.Join(s.dir, "spire-controller-manager.log"), args...)
		s.proc.env = env
		opts.Logf.printf("realcluster: starting spire-controller-manager, ready at %s", s.readyURL)
		return s.proc, s.proc.start()
	}, func() error {
		return waitHTTPReady(ctx, s.proc, scmReadyTimeout, &http.Client{Timeout: 2 * time.Second}, s.readyURL)
	})
	if err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// NewSCM starts spire-controller-manager for a test and stops it in
// t.Cleanup; it fails the test if start-up fails. On test failure the log's
// tail is logged.
func NewSCM(t testing.TB, opts SCMOptions) *SCM {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	start := time.Now()
	s, err := StartSCM(t.Context(), opts)
	if err != nil {
		t.Fatalf("start spire-controller-manager: %v", err)
	}
	t.Logf("realcluster: spire-controller-manager ready in %s", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s", s.proc.logTail(logTailLines))
		}
		if err := s.Stop(); err != nil {
			t.Errorf("stop spire-controller-manager: %v", err)
		}
	})
	return s
}

func hasEnv(env []string, name string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, name+"=") {
			return true
		}
	}
	return false
}

// scmConfig returns the config as a generic object, with the fields the
// harness must fill in filled in. Ports are chosen afresh on each call.
func scmConfig(opts SCMOptions) (map[string]any, error) {
	var data []byte
	var err error
	if len(opts.ConfigYAML) > 0 {
		if data, err = yaml.YAMLToJSON(opts.ConfigYAML); err != nil {
			return nil, fmt.Errorf("parse spire-controller-manager config: %w", err)
		}
	} else if data, err = json.Marshal(opts.Config); err != nil {
		return nil, err
	}
	// Numbers stay as written: gcInterval is integer nanoseconds.
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	config := map[string]any{}
	if err := dec.Decode(&config); err != nil {
		return nil, fmt.Errorf("parse spire-controller-manager config: %w", err)
	}
	if len(opts.ConfigYAML) == 0 {
		for k, v := range opts.Config.Extra {
			config[k] = v
		}
	}
	setDefault := func(key string, value any) {
		if _, ok := config[key]; !ok {
			config[key] = value
		}
	}
	setDefault("apiVersion", "spire.spiffe.io/v1alpha1")
	setDefault("kind", "ControllerManagerConfig")
	setDefault("clusterName", SCMClusterName)
	setDefault("clusterDomain", "cluster.local")
	if opts.SPIRE != nil {
		setDefault("trustDomain", opts.SPIRE.TrustDomain())
		setDefault("spireServerSocketPath", opts.SPIRE.SocketPath())
	}
	if _, ok := config["spireServerSocketPath"]; !ok {
		return nil, errors.New("spire-controller-manager needs SPIRE or spireServerSocketPath in its config")
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	for i, section := range []struct{ name, key string }{{"health", "healthProbeBindAddress"}, {"metrics", "bindAddress"}} {
		m, _ := config[section.name].(map[string]any)
		if m == nil {
			m = map[string]any{}
			config[section.name] = m
		}
		if _, ok := m[section.key]; !ok {
			m[section.key] = "127.0.0.1:" + strconv.Itoa(ports[i])
		}
	}
	return config, nil
}

// writeConfig writes the config file and returns the URLs of the readiness
// and metrics endpoints it configures.
func (s *SCM) writeConfig(config map[string]any) (readyURL, metricsURL string, err error) {
	data, err := yaml.Marshal(config)
	if err != nil {
		return "", "", fmt.Errorf("encode spire-controller-manager config: %w", err)
	}
	if err := os.WriteFile(s.configPath, data, 0o644); err != nil {
		return "", "", fmt.Errorf("write spire-controller-manager config: %w", err)
	}
	health := config["health"].(map[string]any)
	healthAddr, err := loopbackURL(health["healthProbeBindAddress"])
	if err != nil {
		return "", "", fmt.Errorf("health.healthProbeBindAddress: %w", err)
	}
	readyPath, _ := health["readinessEndpointName"].(string)
	if readyPath == "" {
		readyPath = "/readyz"
	}
	metricsAddr, err := loopbackURL(config["metrics"].(map[string]any)["bindAddress"])
	if err != nil {
		metricsAddr = "" // e.g. "0": metrics off
	}
	if metricsAddr != "" {
		metricsURL = metricsAddr + "/metrics"
	}
	return healthAddr + readyPath, metricsURL, nil
}

// loopbackURL turns a bind address such as 0.0.0.0:8083 or :8083 into the
// http URL to reach it on 127.0.0.1.
func loopbackURL(addr any) (string, error) {
	s, _ := addr.(string)
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", fmt.Errorf("bind address %v: %w", addr, err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

// ConfigPath returns the path of the config file it runs with.
func (s *SCM) ConfigPath() string { return s.configPath }

// Dir returns the directory holding the config and the log.
func (s *SCM) Dir() string { return s.dir }

// MetricsURL returns the Prometheus scrape URL, or "" if metrics are off.
func (s *SCM) MetricsURL() string { return s.metricsURL }

// LogTail returns the last n lines of its log, for failure reports.
func (s *SCM) LogTail(n int) string { return s.proc.logTail(n) }

// Running reports whether the process is alive.
func (s *SCM) Running() bool { return s.proc.running() }

// Kill sends SIGKILL, simulating a crash, and waits for the process to exit.
func (s *SCM) Kill() { s.proc.kill() }

// Stop stops it (SIGTERM, then SIGKILL after a grace period) and removes the
// directory if StartSCM created it. It is safe to call more than once.
func (s *SCM) Stop() error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	s.mu.Unlock()
	if s.proc != nil {
		s.proc.stop(scmStopGrace)
	}
	if s.ownedDir {
		if err := os.RemoveAll(s.dir); err != nil {
			return fmt.Errorf("remove spire-controller-manager dir: %w", err)
		}
	}
	return nil
}
