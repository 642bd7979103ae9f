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

// Command local-up runs etcd, kube-apiserver and spire-server on 127.0.0.1,
// built from the pinned modules, with the project's CRDs applied, until
// interrupted. Usage: go run ./hack/local-up [--state-dir DIR] [--trust-domain TD] [--print-env]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "local-up: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	stateDir := flag.String("state-dir", "", "directory for data, logs and the kubeconfig (default <repo>/_output/local-up)")
	trustDomain := flag.String("trust-domain", realcluster.DefaultTrustDomain, "SPIRE trust domain")
	printEnv := flag.Bool("print-env", false, "print only the export lines on stdout (progress goes to stderr)")
	flag.Parse()

	// With --print-env stdout carries nothing but the export lines.
	var out io.Writer = os.Stdout
	if *printEnv {
		out = os.Stderr
	}
	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	root, err := realcluster.RepoRoot()
	if err != nil {
		return err
	}
	if *stateDir == "" {
		*stateDir = filepath.Join(root, "_output", "local-up")
	}
	dir, err := filepath.Abs(*stateDir)
	if err != nil {
		return fmt.Errorf("resolve state dir: %w", err)
	}
	spireDir := filepath.Join(dir, "spire")
	// Every run starts empty: etcd is wiped by StartKube, so wipe SPIRE's datastore too.
	if err := os.RemoveAll(spireDir); err != nil {
		return fmt.Errorf("clear old spire state: %w", err)
	}

	say("local-up: checking real binaries in _output/bin (built from pinned modules by hack/build-tools.sh)")
	if _, err := realcluster.Binaries(ctx, say, realcluster.Etcd, realcluster.KubeAPIServer, realcluster.SPIREServer); err != nil {
		return err
	}

	start := time.Now()
	say("local-up: starting etcd and kube-apiserver in %s", dir)
	kube, err := realcluster.StartKube(ctx, realcluster.KubeOptions{Dir: dir, Logf: say})
	if err != nil {
		return err
	}
	defer stopLogged(say, "etcd and kube-apiserver", kube.Stop)
	say("local-up: kube-apiserver ready in %s", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	spire, err := realcluster.StartSPIRE(ctx, realcluster.SPIREOptions{Dir: spireDir, TrustDomain: *trustDomain, Logf: say})
	if err != nil {
		return err
	}
	defer stopLogged(say, "spire-server", spire.Stop)
	say("local-up: spire-server ready in %s", time.Since(start).Round(time.Millisecond))

	crds, err := realcluster.CRDsDir()
	if err != nil {
		return err
	}
	if _, statErr := os.Stat(crds); statErr != nil {
		say("local-up: WARNING: no CRDs applied: %v", statErr)
	} else {
		names, err := realcluster.ApplyCRDs(ctx, kube.RESTConfig(), crds)
		if err != nil {
			return err
		}
		say("local-up: applied CRDs from %s: %v", crds, names)
	}

	env := fmt.Sprintf("export KUBECONFIG=%s\nexport SPIRE_SERVER_SOCKET=%s\n", kube.Kubeconfig(), spire.SocketPath())
	envFile := filepath.Join(dir, "env")
	if err := os.WriteFile(envFile, []byte(env), 0o644); err != nil {
		return fmt.Errorf("write env file: %w", err)
	}

	say("")
	say("local-up: everything is up on 127.0.0.1 (no kubelet, scheduler or controller-manager: objects are only stored)")
	say("  kubeconfig:          %s", kube.Kubeconfig())
	say("  kube-apiserver:      %s (user %s, group system:masters)", kube.Host(), realcluster.AdminUser)
	say("  SPIRE socket:        %s", spire.SocketPath())
	say("  SPIRE trust domain:  %s", spire.TrustDomain())
	say("  SPIRE metrics:       %s", spire.MetricsURL())
	say("  logs:                %s/*.log, %s", dir, filepath.Join(spireDir, "spire-server.log"))
	say("  env file:            %s (source it in another shell)", envFile)
	say("")
	say("In another shell:")
	say("  export KUBECONFIG=%s", kube.Kubeconfig())
	if bin, err := realcluster.BinDir(); err == nil {
		kubectl, note := filepath.Join(bin, realcluster.Kubectl), ""
		if _, err := os.Stat(kubectl); err != nil {
			note = "   # build it first: hack/build-tools.sh kubectl"
		}
		say("  %s get nodes%s", kubectl, note)
		say("  %s entry show -socketPath %s", filepath.Join(bin, realcluster.SPIREServer), spire.SocketPath())
	}
	say("")
	if *printEnv {
		fmt.Print(env)
	}
	say("local-up: press Ctrl-C to stop everything")

	<-ctx.Done()
	say("\nlocal-up: stopping")
	return nil
}

// stopLogged runs a deferred Stop and reports its error.
func stopLogged(say func(string, ...any), what string, stop func() error) {
	if err := stop(); err != nil && !errors.Is(err, context.Canceled) {
		say("local-up: stop %s: %v", what, err)
		return
	}
	say("local-up: stopped %s", what)
}
