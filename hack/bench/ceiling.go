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
	"crypto/rand"
	"fmt"
	"time"

	entryv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/entry/v1"
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/spire-registrar/spire-registrar/pkg/spire"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// ceiling is SPIRE's own speed for a cell's entries: what no controller can beat.
type ceiling struct {
	// create is a tight client creating every entry in batches of spire.DefaultBatchSize,
	// the controller's batch size, one RPC after the other.
	create time.Duration
	// list is one full ListEntries of all of them, every field decoded.
	list time.Duration
}

// measureCeiling starts a fresh SPIRE server on the cell's datastore (a new database when
// postgres is set) and times the raw create and the raw full listing of n×k entries shaped
// like the controller's: k per pod, each with its own SPIFFE ID, the pod's node agent as
// parent and the pod UID selector.
func measureCeiling(ctx context.Context, n, k, pageSize int, postgres *realcluster.Postgres) (ceiling, error) {
	srv, err := realcluster.StartSPIRE(ctx, realcluster.SPIREOptions{Postgres: postgres})
	if err != nil {
		return ceiling{}, err
	}
	defer func() { _ = srv.Stop() }()
	client, err := spire.Dial(ctx, srv.SocketPath())
	if err != nil {
		return ceiling{}, err
	}
	defer func() { _ = client.Close() }()
	if err := client.WaitReady(ctx); err != nil {
		return ceiling{}, err
	}
	td := srv.TrustDomain()
	nodes := make([]string, max(1, n/podsPerNode))
	for i := range nodes {
		nodes[i] = rand.Text()
	}
	entries := make([]*spiretypes.Entry, 0, n*k)
	for i := range n {
		uid := rand.Text()
		for j := range k {
			entries = append(entries, &spiretypes.Entry{
				SpiffeId:  &spiretypes.SPIFFEID{TrustDomain: td, Path: fmt.Sprintf("/k%d/ns/raw/pod/raw-%06d", j, i)},
				ParentId:  &spiretypes.SPIFFEID{TrustDomain: td, Path: fmt.Sprintf("/spire/agent/k8s_psat/%s/%s", clusterName, nodes[i%len(nodes)])},
				Selectors: []*spiretypes.Selector{{Type: "k8s", Value: podUIDSelector + uid}},
			})
		}
	}
	var c ceiling
	start := time.Now()
	created, err := client.CreateEntries(ctx, entries)
	c.create = time.Since(start)
	if err != nil {
		return c, fmt.Errorf("raw create: %w", err)
	}
	for i, r := range created {
		if r.Err != nil {
			return c, fmt.Errorf("raw create of entry %d: %w", i, r.Err)
		}
	}
	conn, err := grpc.NewClient("unix://"+srv.SocketPath(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		return c, fmt.Errorf("connect to spire server: %w", err)
	}
	defer conn.Close()
	start = time.Now()
	listed, err := listAllEntries(ctx, entryv1.NewEntryClient(conn), pageSize, nil)
	c.list = time.Since(start)
	if err != nil {
		return c, fmt.Errorf("raw list: %w", err)
	}
	if len(listed) != len(entries) {
		return c, fmt.Errorf("raw list returned %d entries, want %d", len(listed), len(entries))
	}
	return c, nil
}

// listAllEntries lists every entry, page after page, with the given output mask (nil: every
// field).
func listAllEntries(ctx context.Context, raw entryv1.EntryClient, pageSize int, mask *spiretypes.EntryMask) ([]*spiretypes.Entry, error) {
	var out []*spiretypes.Entry
	token := ""
	for {
		resp, err := raw.ListEntries(ctx, &entryv1.ListEntriesRequest{PageSize: int32(pageSize), PageToken: token, OutputMask: mask})
		if err != nil {
			return nil, fmt.Errorf("list entries: %w", err)
		}
		out = append(out, resp.GetEntries()...)
		if token = resp.GetNextPageToken(); token == "" {
			return out, nil
		}
	}
}
