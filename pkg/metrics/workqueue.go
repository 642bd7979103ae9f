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
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// Workqueue metrics, labelled by queue name, as client-go reports them to a provider.
var (
	queueDepth = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: "workqueue", Name: "depth", Help: "Current depth of the workqueue.",
	}, []string{"name"})
	queueAdds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "workqueue", Name: "adds_total", Help: "Adds handled by the workqueue.",
	}, []string{"name"})
	queueLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "workqueue", Name: "queue_duration_seconds",
		Help: "How long an item stays in the workqueue before being requested.", Buckets: prometheus.ExponentialBuckets(1e-6, 4, 14),
	}, []string{"name"})
	queueWorkDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "workqueue", Name: "work_duration_seconds",
		Help: "How long processing an item from the workqueue takes.", Buckets: prometheus.ExponentialBuckets(1e-6, 4, 14),
	}, []string{"name"})
	queueUnfinished = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: "workqueue", Name: "unfinished_work_seconds",
		Help: "Seconds of work in progress not yet observed by work_duration.",
	}, []string{"name"})
	queueLongestRunning = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: "workqueue", Name: "longest_running_processor_seconds",
		Help: "Seconds the longest running processor has been running.",
	}, []string{"name"})
	queueRetries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "workqueue", Name: "retries_total", Help: "Retries handled by the workqueue.",
	}, []string{"name"})
)

// workqueueProvider hands client-go's named queues their metrics.
type workqueueProvider struct{}

func (workqueueProvider) NewDepthMetric(name string) workqueue.GaugeMetric {
	return queueDepth.WithLabelValues(name)
}
func (workqueueProvider) NewAddsMetric(name string) workqueue.CounterMetric {
	return queueAdds.WithLabelValues(name)
}
func (workqueueProvider) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return queueLatency.WithLabelValues(name)
}
func (workqueueProvider) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return queueWorkDuration.WithLabelValues(name)
}
func (workqueueProvider) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return queueUnfinished.WithLabelValues(name)
}
func (workqueueProvider) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return queueLongestRunning.WithLabelValues(name)
}
func (workqueueProvider) NewRetriesMetric(name string) workqueue.CounterMetric {
	return queueRetries.WithLabelValues(name)
}

// registerWorkqueueMetrics registers the workqueue metrics on Registry. They stay empty until
// a binary calls SetWorkqueueProvider.
func registerWorkqueueMetrics() {
	Registry.MustRegister(queueDepth, queueAdds, queueLatency, queueWorkDuration, queueUnfinished, queueLongestRunning, queueRetries)
}

var setProviderOnce sync.Once

// SetWorkqueueProvider makes every named client-go workqueue created from now on report to
// Registry. It changes client-go's process-wide provider, so it is the binary's call, never a
// library's: the spire-registrar binary makes it at start, and an embedding binary makes it
// (or sets a provider of its own) as it sees fit. client-go keeps the first provider set, and
// only queues created after it report.
func SetWorkqueueProvider() {
	setProviderOnce.Do(func() { workqueue.SetProvider(workqueueProvider{}) })
}
