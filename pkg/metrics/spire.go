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

package metrics

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc/status"

	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

// spireReachable reports spire_registrar_spire_reachable from the Reachability of the
// binary's SPIRE client, and nothing before it has one.
var spireReachable = &reachabilityCollector{desc: prometheus.NewDesc(namespace+"_spire_reachable",
	"1 while SPIRE answers spire-registrar's calls and connections, 0 from a failure to reach it until it answers again.", nil, nil)}

// ReportSPIREReachability makes spire_registrar_spire_reachable follow r. The binary calls it
// with the client it dialled; like SetWorkqueueProvider, it is not a library's call.
func ReportSPIREReachability(r *spire.Reachability) { spireReachable.r.Store(r) }

type reachabilityCollector struct {
	desc *prometheus.Desc
	r    atomic.Pointer[spire.Reachability]
}

func (c *reachabilityCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *reachabilityCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.r.Load()
	if r == nil {
		return
	}
	v := 1.0
	if since, _ := r.Unreachable(); !since.IsZero() {
		v = 0
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v)
}

// InstrumentSPIRE wraps a SPIRE client so that every call is counted and timed, and every
// item of a batch call counted by result.
func InstrumentSPIRE(inner spire.API) spire.API {
	return &instrumented{inner: inner}
}

type instrumented struct {
	inner spire.API
}

// observe records one call; its result is returned unchanged.
func observe[T any](method string, call func() (T, error)) (T, error) {
	start := time.Now()
	out, err := call()
	SPIRERequestDuration.WithLabelValues(method).Observe(time.Since(start).Seconds())
	SPIRERequests.WithLabelValues(method, status.Code(err).String()).Inc()
	return out, err
}

func countItems(method string, errs []error) {
	for _, err := range errs {
		result := "success"
		if err != nil {
			result = status.Code(err).String()
		}
		SPIREItems.WithLabelValues(method, result).Inc()
	}
}

// errsOf picks the per-item errors out of a batch call's results.
func errsOf[R any](rs []R, errOf func(R) error) []error {
	out := make([]error, len(rs))
	for i, r := range rs {
		out[i] = errOf(r)
	}
	return out
}

func entryErr(r spire.EntryResult) error           { return r.Err }
func deleteErr(r spire.DeleteResult) error         { return r.Err }
func federationErr(r spire.FederationResult) error { return r.Err }

func (c *instrumented) ListEntries(ctx context.Context) ([]*types.Entry, error) {
	return observe("ListEntries", func() ([]*types.Entry, error) { return c.inner.ListEntries(ctx) })
}

// Probe passes the probe on, unobserved: it is no work of SPIRE's worth a metric.
func (c *instrumented) Probe(ctx context.Context) error {
	return spire.Probe(ctx, c.inner)
}

// WatchReconnects passes the watch on to the inner client.
func (c *instrumented) WatchReconnects(ctx context.Context, reconnected func()) {
	if !spire.WatchReconnects(ctx, c.inner, reconnected) {
		<-ctx.Done()
	}
}

// ListEntryPages lists page by page through the inner client, observed as one ListEntries
// call whose duration includes the caller's handling of the pages.
func (c *instrumented) ListEntryPages(ctx context.Context, page func([]*types.Entry) error) error {
	_, err := observe("ListEntries", func() (struct{}, error) { return struct{}{}, spire.ListEntryPages(ctx, c.inner, page) })
	return err
}

func (c *instrumented) CreateEntries(ctx context.Context, entries []*types.Entry) ([]spire.EntryResult, error) {
	rs, err := observe("BatchCreateEntry", func() ([]spire.EntryResult, error) { return c.inner.CreateEntries(ctx, entries) })
	countItems("BatchCreateEntry", errsOf(rs, entryErr))
	return rs, err
}

func (c *instrumented) UpdateEntries(ctx context.Context, entries []*types.Entry, mask *types.EntryMask) ([]spire.EntryResult, error) {
	rs, err := observe("BatchUpdateEntry", func() ([]spire.EntryResult, error) { return c.inner.UpdateEntries(ctx, entries, mask) })
	countItems("BatchUpdateEntry", errsOf(rs, entryErr))
	return rs, err
}

func (c *instrumented) DeleteEntries(ctx context.Context, ids []string) ([]spire.DeleteResult, error) {
	rs, err := observe("BatchDeleteEntry", func() ([]spire.DeleteResult, error) { return c.inner.DeleteEntries(ctx, ids) })
	countItems("BatchDeleteEntry", errsOf(rs, deleteErr))
	return rs, err
}

func (c *instrumented) ListFederationRelationships(ctx context.Context) ([]*types.FederationRelationship, error) {
	return observe("ListFederationRelationships", func() ([]*types.FederationRelationship, error) {
		return c.inner.ListFederationRelationships(ctx)
	})
}

func (c *instrumented) CreateFederationRelationships(ctx context.Context, rels []*types.FederationRelationship) ([]spire.FederationResult, error) {
	rs, err := observe("BatchCreateFederationRelationship", func() ([]spire.FederationResult, error) {
		return c.inner.CreateFederationRelationships(ctx, rels)
	})
	countItems("BatchCreateFederationRelationship", errsOf(rs, federationErr))
	return rs, err
}

func (c *instrumented) UpdateFederationRelationships(ctx context.Context, rels []*types.FederationRelationship, mask *types.FederationRelationshipMask) ([]spire.FederationResult, error) {
	rs, err := observe("BatchUpdateFederationRelationship", func() ([]spire.FederationResult, error) {
		return c.inner.UpdateFederationRelationships(ctx, rels, mask)
	})
	countItems("BatchUpdateFederationRelationship", errsOf(rs, federationErr))
	return rs, err
}

func (c *instrumented) DeleteFederationRelationships(ctx context.Context, trustDomains []string) ([]spire.DeleteResult, error) {
	rs, err := observe("BatchDeleteFederationRelationship", func() ([]spire.DeleteResult, error) {
		return c.inner.DeleteFederationRelationships(ctx, trustDomains)
	})
	countItems("BatchDeleteFederationRelationship", errsOf(rs, deleteErr))
	return rs, err
}
