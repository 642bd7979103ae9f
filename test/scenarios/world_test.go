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

package scenarios

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	entryv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/entry/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	spireclientset "github.com/spire-registrar/spire-registrar/generated/clientset/versioned"
	"github.com/spire-registrar/spire-registrar/pkg/app"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

const (
	trustDomain   = "td"
	clusterName   = "scenarios"
	clusterDomain = "cluster.local"
	// gcInterval makes the controllers list SPIRE in full several times per scenario, so
	// that the scenarios cover full resyncs too (the zero-write churn above all).
	gcInterval = 5 * time.Second
	// workers is the controllers' worker count: the binary's default (--workers).
	workers = 10
	// worldStartTimeout bounds the start of every process of the world.
	worldStartTimeout = 3 * time.Minute
)

// worldNodes are the kwok nodes every scenario may use; a scenario that deletes a node
// makes one of its own.
var worldNodes = []string{"kwok-1", "kwok-2", "kwok-3"}

// world is what the scenarios share: the full Kubernetes world, SPIRE on PostgreSQL and
// spire-registrar's controllers running in this process as the binary runs them.
type world struct {
	dir      string
	kube     *realcluster.Kube
	postgres *realcluster.Postgres
	spire    *realcluster.SPIRE
	client   kubernetes.Interface
	spireAPI spireclientset.Interface
	// entries is SPIRE's own entry API, for polling faster than the CLI can.
	conn    *grpc.ClientConn
	entries entryv1.EntryClient

	// exclusive is held by each scenario but the background ones, which overlap them.
	exclusive sync.Mutex

	mu sync.Mutex
	// active maps the namespaces scenarios run in to whether their ClusterSPIFFEID
	// populates DNS names.
	active map[string]bool

	stopControllers context.CancelFunc
	controllersDone chan error
	logFile         *os.File
}

var (
	worldOnce sync.Once
	shared    *world
	worldErr  error
)

// TestMain stops the shared world once every test has run. Most scenarios are parallel
// tests that run one at a time (see newScenario) next to a background one; they must not
// wait for a slot behind tests that wait for their turn, so unless -parallel is given every
// parallel test gets one. The status churn scenario is not parallel: it runs first, alone, as
// it must to count SPIRE's writes.
func TestMain(m *testing.M) {
	flag.Parse()
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		if err := flag.Set("test.parallel", "16"); err != nil {
			log.Fatal(err)
		}
	}
	code := m.Run()
	if shared != nil && code != 0 {
		shared.logTails()
	}
	if shared != nil {
		if err := shared.close(); err != nil {
			log.Printf("stop the scenarios' world: %v", err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// sharedWorld returns the world, starting it on first use; it skips the test with -short.
func sharedWorld(t *testing.T) *world {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the full world of real binaries; skipped with -short")
	}
	worldOnce.Do(func() {
		start := time.Now()
		// The harness logs through logf after start-up too, when this test may be over.
		var starting atomic.Bool
		starting.Store(true)
		defer starting.Store(false)
		logf := func(format string, args ...any) {
			if starting.Load() {
				t.Logf(format, args...)
			}
		}
		shared, worldErr = startWorld(logf)
		if worldErr == nil {
			t.Logf("world ready in %s: kube-apiserver, kube-scheduler, kube-controller-manager, kwok with %d nodes, PostgreSQL, SPIRE, spire-registrar",
				time.Since(start).Round(time.Millisecond), len(worldNodes))
		}
	})
	if worldErr != nil {
		t.Fatalf("start the world: %v", worldErr)
	}
	return shared
}

// startWorld starts everything; on failure it stops what it started.
func startWorld(logf realcluster.Logf) (w *world, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), worldStartTimeout)
	defer cancel()
	w = &world{active: map[string]bool{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, w.close())
		}
	}()
	if w.dir, err = os.MkdirTemp("", "scenarios-"); err != nil {
		return nil, err
	}
	// Postgres and SPIRE start while kube-apiserver does.
	var pgErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		if w.postgres, pgErr = realcluster.StartPostgres(ctx, realcluster.PostgresOptions{Logf: logf}); pgErr != nil {
			return
		}
		w.spire, pgErr = realcluster.StartSPIRE(ctx, realcluster.SPIREOptions{TrustDomain: trustDomain, Postgres: w.postgres, Logf: logf})
	})
	w.kube, err = realcluster.StartKube(ctx, realcluster.KubeOptions{Dir: filepath.Join(w.dir, "kube"), Full: true, Logf: logf})
	wg.Wait()
	if err = errors.Join(err, pgErr); err != nil {
		return nil, err
	}
	crdDir, err := realcluster.CRDsDir()
	if err != nil {
		return nil, err
	}
	if _, err := realcluster.ApplyCRDs(ctx, w.kube.RESTConfig(), crdDir); err != nil {
		return nil, err
	}
	if w.client, err = w.kube.Client(); err != nil {
		return nil, err
	}
	if w.spireAPI, err = spireclientset.NewForConfig(w.kube.RESTConfig()); err != nil {
		return nil, err
	}
	for _, name := range worldNodes {
		if _, err := realcluster.CreateKwokNode(ctx, w.client, name); err != nil {
			return nil, err
		}
	}
	for _, name := range worldNodes {
		if err := realcluster.WaitNodeReady(ctx, w.client, name); err != nil {
			return nil, err
		}
	}
	if w.conn, err = grpc.NewClient("unix://"+w.spire.SocketPath(), grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		return nil, fmt.Errorf("dial spire-server: %w", err)
	}
	w.entries = entryv1.NewEntryClient(w.conn)
	return w, w.startControllers(ctx)
}

// startControllers runs spire-registrar's controllers in this process, as the binary runs
// them, logging to a file of the world's directory.
func (w *world) startControllers(ctx context.Context) error {
	cfg, err := config.Parse(fmt.Appendf(nil, `
apiVersion: spire.spiffe.io/v1alpha1
kind: ControllerManagerConfig
trustDomain: %s
clusterName: %s
clusterDomain: %s
spireServerSocketPath: %s
gcInterval: %s
`, trustDomain, clusterName, clusterDomain, w.spire.SocketPath(), gcInterval))
	if err != nil {
		return err
	}
	client, err := spire.Dial(ctx, cfg.SPIREServerSocketPath)
	if err != nil {
		return err
	}
	if w.logFile, err = os.Create(filepath.Join(w.dir, "spire-registrar.log")); err != nil {
		return err
	}
	// V(3) logs every write with its reason: the tail printed on failure says what happened.
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(w.logFile), textlogger.Verbosity(3)))
	klog.SetLogger(logger)
	runCtx, stop := context.WithCancel(klog.NewContext(context.Background(), logger))
	w.stopControllers = stop
	w.controllersDone = make(chan error, 1)
	kubeInformers, spireInformers := app.NewInformerFactories(w.client, w.spireAPI)
	go func() {
		defer client.Close()
		w.controllersDone <- app.Run(runCtx, app.ControllerContext{Config: cfg, KubeClient: w.client, SpireAPIClient: w.spireAPI,
			KubeInformers: kubeInformers, SpireInformers: spireInformers, SPIRE: client}, workers, nil)
	}()
	return nil
}

// controllerLogOffset is where the controllers' log ends now.
func (w *world) controllerLogOffset() int64 {
	info, err := w.logFile.Stat()
	if err != nil {
		return 0
	}
	return info.Size()
}

// writesLoggedSince returns the lines of the controllers' log, after offset, that announce
// an entry write.
func (w *world) writesLoggedSince(offset int64) []string {
	data, err := os.ReadFile(w.logFile.Name())
	if err != nil || int64(len(data)) < offset {
		return nil
	}
	var lines []string
	for line := range strings.Lines(string(data[offset:])) {
		if strings.Contains(line, `"Create entry"`) || strings.Contains(line, `"Update entry"`) || strings.Contains(line, `"Delete entry"`) {
			lines = append(lines, strings.TrimSpace(line))
		}
	}
	return lines
}

// logTails prints the end of every log of the world, for failures.
func (w *world) logTails() {
	const lines = 40
	log.Printf("%s", w.kube.LogTails(lines))
	log.Printf("spire-server:\n%s", w.spire.LogTail(lines))
	log.Printf("postgres:\n%s", w.postgres.LogTail(lines))
	if data, err := os.ReadFile(w.logFile.Name()); err == nil {
		all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		log.Printf("spire-registrar:\n%s", strings.Join(all[max(len(all)-lines, 0):], "\n"))
	}
}

// close stops the controllers, then everything else, and removes the world's directory.
func (w *world) close() error {
	var errs []error
	if w.stopControllers != nil {
		w.stopControllers()
		if err := <-w.controllersDone; err != nil {
			errs = append(errs, fmt.Errorf("app.Run: %w", err))
		}
	}
	if w.conn != nil {
		errs = append(errs, w.conn.Close())
	}
	if w.spire != nil {
		errs = append(errs, w.spire.Stop())
	}
	if w.postgres != nil {
		errs = append(errs, w.postgres.Stop())
	}
	if w.kube != nil {
		errs = append(errs, w.kube.Stop())
	}
	if w.logFile != nil {
		errs = append(errs, w.logFile.Close())
	}
	if w.dir != "" {
		errs = append(errs, os.RemoveAll(w.dir))
	}
	return errors.Join(errs...)
}
