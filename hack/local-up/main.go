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

// Command local-up runs a Kubernetes control plane and spire-server on 127.0.0.1, built from
// the pinned modules, with the project's CRDs applied, until interrupted. By default it is the
// full world: etcd, kube-apiserver, kube-scheduler, kube-controller-manager, and kwok playing
// the kubelet of a few fake nodes, so that a Deployment's pods are scheduled and turn Running.
// With --light only etcd and kube-apiserver run, and objects are only stored.
//
// Usage:
//
//	go run ./hack/local-up [--state-dir DIR] [--trust-domain TD] [--light] [--nodes N] [--print-env]
//	go run ./hack/local-up demo --kubeconfig FILE --spire-socket PATH [--light] [--replicas N]
//
// The demo subcommand applies the demo workload to a running local-up and waits until every pod
// has its SPIRE entry (see demo.go).
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
	if len(os.Args) > 1 && os.Args[1] == "demo" {
		return runDemo(os.Args[2:])
	}
	stateDir := flag.String("state-dir", "", "directory for data, logs and the kubeconfig (default <repo>/_output/local-up)")
	trustDomain := flag.String("trust-domain", realcluster.DefaultTrustDomain, "SPIRE trust domain")
	printEnv := flag.Bool("print-env", false, "print only the export lines on stdout (progress goes to stderr)")
	light := flag.Bool("light", false, "run only etcd and kube-apiserver: no scheduler, controller-manager or kwok")
	nodes := flag.Int("nodes", 2, "kwok nodes to create in the full world")
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

	bin, err := realcluster.BinDir()
	if err != nil {
		return err
	}
	binaries := []string{realcluster.Etcd, realcluster.KubeAPIServer, realcluster.SPIREServer}
	world := "etcd and kube-apiserver"
	if !*light {
		binaries = append(binaries, realcluster.KubeScheduler, realcluster.KubeControllerManager, realcluster.Kwok)
		world = "etcd, kube-apiserver, kube-scheduler, kube-controller-manager and kwok"
	}
	say("local-up: checking real binaries in %s (built from pinned modules by hack/build-tools.sh)", bin)
	if _, err := realcluster.Binaries(ctx, say, binaries...); err != nil {
		return err
	}

	start := time.Now()
	say("local-up: starting %s in %s", world, dir)
	kube, err := realcluster.StartKube(ctx, realcluster.KubeOptions{Dir: dir, Logf: say, Full: !*light})
	if err != nil {
		return err
	}
	defer stopLogged(say, world, kube.Stop)
	say("local-up: %s ready in %s", world, time.Since(start).Round(time.Millisecond))
	var nodeNames []string
	if !*light {
		if nodeNames, err = createKwokNodes(ctx, kube, *nodes); err != nil {
			return err
		}
		say("local-up: %d kwok nodes Ready: %v", len(nodeNames), nodeNames)
	}

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
	if *light {
		say("local-up: everything is up on 127.0.0.1 (no kubelet, scheduler or controller-manager: objects are only stored)")
	} else {
		say("local-up: everything is up on 127.0.0.1 (kwok plays the kubelet of nodes %v: pods are scheduled and run)", nodeNames)
	}
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
	kubectl, note := filepath.Join(bin, realcluster.Kubectl), ""
	if _, err := os.Stat(kubectl); err != nil {
		note = "   # build it first: hack/build-tools.sh kubectl"
	}
	say("  %s get nodes%s", kubectl, note)
	say("  %s entry show -socketPath %s", filepath.Join(bin, realcluster.SPIREServer), spire.SocketPath())
	say("")
	if *printEnv {
		fmt.Print(env)
	}
	say("local-up: press Ctrl-C to stop everything")

	<-ctx.Done()
	say("\nlocal-up: stopping")
	return nil
}

// createKwokNodes creates n nodes that kwok runs pods on, and waits until the scheduler will
// place pods on them.
func createKwokNodes(ctx context.Context, kube *realcluster.Kube, n int) ([]string, error) {
	client, err := kube.Client()
	if err != nil {
		return nil, err
	}
	var names []string
	for i := range n {
		name := fmt.Sprintf("kwok-node-%d", i)
		if _, err := realcluster.CreateKwokNode(ctx, client, name); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	for _, name := range names {
		if err := realcluster.WaitNodeReady(ctx, client, name); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// stopLogged runs a deferred Stop and reports its error.
func stopLogged(say func(string, ...any), what string, stop func() error) {
	if err := stop(); err != nil && !errors.Is(err, context.Canceled) {
		say("local-up: stop %s: %v", what, err)
		return
	}
	say("local-up: stopped %s", what)
}
