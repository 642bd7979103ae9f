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

// Package metrics holds spire-registrar's Prometheus metrics. They are registered on Registry,
// which the binary serves on /metrics and an embedding binary may gather from.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

const namespace = "spire_registrar"

// Registry holds every spire-registrar metric, plus the Go runtime and process collectors.
var Registry = prometheus.NewRegistry()

var (
	// SyncDuration is how long one sync of one key took, by controller and kind of key.
	SyncDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "sync_duration_seconds",
		Help:    "Time to sync one key, by controller and kind of key.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	}, []string{"controller", "kind"})

	// SPIRERequests counts SPIRE admin API calls by method and gRPC code.
	SPIRERequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "spire_requests_total",
		Help: "SPIRE server API calls, by method and gRPC status code.",
	}, []string{"method", "code"})

	// SPIRERequestDuration is the latency of SPIRE admin API calls by method.
	SPIRERequestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "spire_request_duration_seconds",
		Help:    "Latency of SPIRE server API calls, by method.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18),
	}, []string{"method"})

	// SPIREItems counts the items of SPIRE batch calls by method and result, so that a batch
	// that succeeds as an RPC but fails item by item is visible.
	SPIREItems = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "spire_items_total",
		Help: "Items written through SPIRE batch calls, by method and result (success or the item's gRPC code).",
	}, []string{"method", "result"})

	// RenderFailures counts entries that could not be rendered from their templates or spec.
	RenderFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "render_failures_total",
		Help: "Entries that could not be rendered, by kind of declaring resource.",
	}, []string{"kind"})

	// WholePodReads counts the pods read whole from the API server, for ClusterSPIFFEIDs whose
	// templates read fields the pod cache does not keep, by result: found, not_found (the pod
	// is gone) or error.
	WholePodReads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "whole_pod_reads_total",
		Help: "Pods read whole from the API server for templates that read fields the pod cache does not keep, by result.",
	}, []string{"result"})

	// FullResyncs counts full resyncs by controller and result.
	FullResyncs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "full_resyncs_total",
		Help: "Full resyncs against a complete SPIRE list, by controller and result.",
	}, []string{"controller", "result"})

	// FullResyncStarts counts full resyncs by controller and by what started them.
	FullResyncStarts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "full_resync_starts_total",
		Help: "Full resyncs started, by controller and reason: start (the first, and its retries), interval (gcInterval), " +
			"reconnect (the connection to SPIRE came back after it was lost, and retries until one succeeds).",
	}, []string{"controller", "reason"})

	// LastFullResyncTime is when the last successful full resync ended.
	LastFullResyncTime = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "last_full_resync_timestamp_seconds",
		Help: "Unix time the last successful full resync ended, by controller.",
	}, []string{"controller"})

	// LastFullResyncDuration is how long the last full resync took.
	LastFullResyncDuration = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "last_full_resync_duration_seconds",
		Help: "Duration of the last full resync, by controller.",
	}, []string{"controller"})

	// PodEntryLatency is the time from a pod becoming eligible for entries to SPIRE holding
	// all of them, observed once per pod by PodEntryLatencyTracker (see it for the rule).
	PodEntryLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Name: "pod_entry_latency_seconds",
		Help: "Time from a pod becoming eligible (scheduled, or created with a node) to SPIRE holding all its entries; " +
			"observed once per pod whose first entry this process wrote.",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800},
	})

	// PodSPIREWriteDuration is the SPIRE-write phase of a pod sync: the time it spent applying
	// its plan to SPIRE. Syncs that had nothing to write are not observed.
	PodSPIREWriteDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Name: "pod_spire_write_duration_seconds",
		Help:    "Time a pod sync spent writing its entries to SPIRE, for syncs that wrote.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18),
	})

	// ClusterSPIFFEIDEntries are the per-pod outcomes a ClusterSPIFFEID's status counts, by
	// outcome: set, masked, entry_failure, render_failure, and waiting_for_node (pods not
	// scheduled yet, or on a node not in the cache, which the status counts as render failures).
	ClusterSPIFFEIDEntries = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "clusterspiffeid_entries",
		Help: "Entries of the pods a ClusterSPIFFEID selects, by outcome (set, masked, entry_failure, render_failure, waiting_for_node).",
	}, []string{"clusterspiffeid", "outcome"})

	// ControllerSynced is 1 once a controller's first full resync succeeded: from then on it
	// writes to SPIRE. It is 0 while it waits for that, and absent in a process that does not
	// run the controller (a standby replica waiting for the lease).
	ControllerSynced = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "controller_synced",
		Help: "1 once the controller's first full resync with SPIRE succeeded, 0 while it waits for it; absent in a standby.",
	}, []string{"controller"})

	// ParkedKeys is how many keys of a queue wait for SPIRE to answer before they are queued
	// again (runner.Parking): keys whose sync failed only because SPIRE could not be reached,
	// and pod certificate requests waiting for a usable CA. They are in neither the queue's
	// depth nor its retries.
	ParkedKeys = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "parked_keys",
		Help: "Keys of a queue waiting for SPIRE to answer (pod certificate requests: for a usable CA) before they are queued again; not in the queue's depth.",
	}, []string{"name"})

	// StaticManifestErrors is how many problems the last read of the static manifest
	// directory found: files that do not decode, and resources declared twice.
	StaticManifestErrors = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "static_manifest_errors",
		Help: "Problems found by the last read of the static manifest directory (static mode only).",
	})

	// ConfigUnknownFields is how many fields of the config file its format does not declare,
	// as loaded at start: they are ignored, as spire-controller-manager ignores them, and each
	// is logged once as a warning. It is not labelled by field: the values would come from the
	// file's content, the log already names each one, and an alert needs only to know that
	// there are any.
	ConfigUnknownFields = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "config_unknown_fields",
		Help: "Fields of the config file that its format does not declare, ignored at start; each is logged as a warning.",
	})

	// ConfigDuplicateFields is how many fields the config file sets more than once, as loaded
	// at start: the last value is used, as in spire-controller-manager, and each is logged once
	// as a warning. Unlabelled for the reasons ConfigUnknownFields is.
	ConfigDuplicateFields = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "config_duplicate_fields",
		Help: "Fields the config file sets more than once, of which the last value is used; each is logged as a warning.",
	})
)

func init() {
	Registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		SyncDuration, SPIRERequests, SPIRERequestDuration, SPIREItems, RenderFailures, WholePodReads,
		FullResyncs, FullResyncStarts, LastFullResyncTime, LastFullResyncDuration, StaticManifestErrors,
		PodEntryLatency, PodSPIREWriteDuration, ClusterSPIFFEIDEntries, ControllerSynced, ParkedKeys, spireReachable,
		ConfigUnknownFields, ConfigDuplicateFields,
	)
	registerWorkqueueMetrics()
}
