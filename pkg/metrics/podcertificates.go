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

import "github.com/prometheus/client_golang/prometheus"

var (
	// PodCertificateRequests counts the PodCertificateRequests the signer ended, by result
	// (issued, denied, failed) and the condition's reason.
	PodCertificateRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "pod_certificate_requests_total",
		Help: "PodCertificateRequests the signer ended, by result (issued, denied, failed) and reason.",
	}, []string{"result", "reason"})

	// PodCertificateIssueLatency is the time from a request's creation to its issued
	// certificate chain being written.
	PodCertificateIssueLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Name: "pod_certificate_issue_latency_seconds",
		Help:    "Time from a PodCertificateRequest's creation to its certificate chain being written.",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
	})

	// PodCertificateRequestsWaiting is how many PodCertificateRequests wait for their pod to
	// get an identity before they are denied, by the reason they would be denied with now.
	PodCertificateRequestsWaiting = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "pod_certificate_requests_waiting",
		Help: "PodCertificateRequests whose pod has no identity yet, waiting for one (podCertificates.waitForIdentity) before they are denied, by the reason they would be denied with.",
	}, []string{"reason"})

	// PodCertificateCARenewals counts the signer's requests for a downstream CA, by result
	// (success, error).
	PodCertificateCARenewals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "pod_certificate_ca_renewals_total",
		Help: "Requests to SPIRE for the pod certificate signer's downstream CA, by result (success, error).",
	}, []string{"result"})

	// PodCertificateCAExpiry is when the signer's downstream CA expires. It has no labels, and
	// is a vector only so that it is absent until the signer has a CA: a process without the
	// signer exports none, which an alert on it must not read as an expired CA.
	PodCertificateCAExpiry = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "pod_certificate_ca_expiry_timestamp_seconds",
		Help: "Unix time the pod certificate signer's downstream CA expires; absent until it has one.",
	}, nil)
)

func init() {
	Registry.MustRegister(PodCertificateRequests, PodCertificateRequestsWaiting, PodCertificateIssueLatency, PodCertificateCARenewals, PodCertificateCAExpiry)
}
