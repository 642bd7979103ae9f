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

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// rolloutWorld is what every rollout column shares: the full world with its kwok nodes, and
// the PostgreSQL cluster the postgres columns' SPIRE servers keep their databases in.
type rolloutWorld struct {
	cl       *cluster
	postgres *realcluster.Postgres
}

// startRolloutWorld starts the full world with enough kwok nodes for maxN pods and, when
// withPostgres, a PostgreSQL cluster.
func startRolloutWorld(ctx context.Context, logf realcluster.Logf, maxN int, withPostgres bool) (_ *rolloutWorld, err error) {
	w := &rolloutWorld{}
	defer func() {
		if err != nil {
			w.stop()
		}
	}()
	if w.cl, err = startCluster(ctx, logf, true); err != nil {
		return nil, err
	}
	if withPostgres {
		if w.postgres, err = realcluster.StartPostgres(ctx, realcluster.PostgresOptions{Logf: logf}); err != nil {
			return nil, err
		}
	}
	var nodes []string
	for i := range max(2, maxN/podsPerNode) {
		node, err := realcluster.CreateKwokNode(ctx, w.cl.kubeClient, fmt.Sprintf("kwok-%03d", i))
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, node.Name)
	}
	for _, name := range nodes {
		if err := realcluster.WaitNodeReady(ctx, w.cl.kubeClient, name); err != nil {
			return nil, err
		}
	}
	logf("%d kwok nodes ready", len(nodes))
	return w, nil
}

func (w *rolloutWorld) stop() {
	if w.postgres != nil {
		if err := w.postgres.Stop(); err != nil {
			w.cl.logf("stopping postgres: %v", err)
		}
	}
	if w.cl != nil {
		w.cl.stop()
	}
}

// rollout measures one rollout of n replicas with a fresh SPIRE server on datastore.
func (w *rolloutWorld) rollout(ctx context.Context, datastore string, n int, o options) (rolloutResult, error) {
	spec := runSpec{name: fmt.Sprintf("rollout-%s-%d", datastore, n), workers: o.workers, batching: o.batching}
	if datastore == datastorePostgres {
		spec.postgres = w.postgres
	}
	res, err := benchRollout(ctx, w.cl, spec, rolloutOptions{n: n, poll: o.poll, flapsPerSecond: o.flapsPerSecond, timeout: o.timeout})
	res.datastore = datastore
	return res, err
}

// runRolloutBench is -mode rollout: every N with every datastore, one table.
func runRolloutBench(ctx context.Context, o options) error {
	started := time.Now()
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("create output directory: %w", err)
	}
	logf("starting the full world: etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kwok")
	w, err := startRolloutWorld(ctx, logf, slices.Max(o.sizes), slices.Contains(o.datastores, datastorePostgres))
	if err != nil {
		return err
	}
	defer w.stop()

	var results []rolloutResult
	for _, n := range o.sizes {
		for _, ds := range o.datastores {
			logf("N=%d on %s: rollout", n, ds)
			res, err := w.rollout(ctx, ds, n, o)
			if err != nil {
				return fmt.Errorf("rollout of N=%d on %s: %w", n, ds, err)
			}
			results = append(results, res)
		}
	}

	table := rolloutMarkdown(results, o, started)
	fmt.Print(table)
	csvData, err := rolloutCSV(results)
	if err != nil {
		return fmt.Errorf("render CSV: %w", err)
	}
	base := filepath.Join(o.out, "rollout-"+started.Format("20060102-150405"))
	if err := os.WriteFile(base+".md", []byte(table), 0o644); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	if err := os.WriteFile(base+".csv", csvData, 0o644); err != nil {
		return fmt.Errorf("write CSV: %w", err)
	}
	logf("wrote %s.md and %s.csv", base, base)
	return nil
}
