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
	"context"
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The official SPIRE Helm chart (helm-charts-hardened, charts/spire/charts/spire-server) as it
// deploys spire-controller-manager for release "spire" in namespace "spire-server".
const (
	// ChartNamespace is the namespace the chart installs the SPIRE server into.
	ChartNamespace = "spire-server"
	// ChartLeaseName is the Lease the chart's config names: the first 8 hex digits of
	// sha256("spire-server-spire") and ".spiffe.io".
	ChartLeaseName = "6f304bd2.spiffe.io"
	// ChartClassName is the chart's className: <namespace>-<release>.
	ChartClassName = "spire-server-spire"
	// ChartEntryIDPrefix is the entryIDPrefix the chart sets: its clusterName.
	ChartEntryIDPrefix = "example-cluster"
	// ChartWebhookName is the chart's ValidatingWebhookConfiguration.
	ChartWebhookName = "spire-server-spire-controller-manager-webhook"
	// ChartSocketDir is where the chart mounts the SPIRE server's admin socket directory in the
	// controller manager's container.
	ChartSocketDir = "/tmp/spire-server/private"
	// ChartMetricsPort, ChartHealthPort and ChartWebhookPort are the container ports of the
	// chart's first controller manager; each external cluster's manager takes the next two
	// metrics and health ports.
	ChartMetricsPort = 8082
	ChartHealthPort  = 8083
	ChartWebhookPort = 9443
)

// ChartConfig is the controller-manager-config.yaml the chart renders with its default values
// (trust domain example.org, cluster example-cluster).
const ChartConfig = `apiVersion: spire.spiffe.io/v1alpha1
kind: ControllerManagerConfig
metadata: {name: spire-controller-manager, namespace: spire-server}
metrics: {bindAddress: 0.0.0.0:8082}
health: {healthProbeBindAddress: 0.0.0.0:8083}
gcInterval: 10000000000
logLevel: info
logEncoding: console
leaderElection: {leaderElect: true, resourceName: 6f304bd2.spiffe.io, resourceNamespace: spire-server, leaseDuration: 15s, renewDeadline: 10s, retryPeriod: 2s}
validatingWebhookConfigurationName: spire-server-spire-controller-manager-webhook
entryIDPrefix: example-cluster
clusterName: example-cluster
clusterDomain: cluster.local
trustDomain: example.org
ignoreNamespaces: [kube-system, kube-public, local-path-storage, "openshift-.*", "ibm-.*"]
spireServerSocketPath: /tmp/spire-server/private/api.sock
className: spire-server-spire
watchClassless: false
filterByClassName: true
parentIDTemplate: "spiffe://{{ .TrustDomain }}/spire/agent/k8s_psat/{{ .ClusterName }}/{{ .NodeMeta.UID }}"
reconcile: {clusterSPIFFEIDs: true, clusterFederatedTrustDomains: true, clusterStaticEntries: true}
`

// The paths the chart's ValidatingWebhookConfiguration calls, which the webhook must serve.
const (
	ChartClusterFederatedTrustDomainPath = "/validate-spire-spiffe-io-v1alpha1-clusterfederatedtrustdomain"
	ChartClusterSPIFFEIDPath             = "/validate-spire-spiffe-io-v1alpha1-clusterspiffeid"
)

// RegisterChartWebhooks creates a ValidatingWebhookConfiguration of the chart's shape: its two
// webhooks, on the chart's paths, failing closed, called by URL on port of localhost, since no
// Service can reach a process outside a cluster.
func RegisterChartWebhooks(ctx context.Context, client kubernetes.Interface, name string, port int) error {
	fail, none := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone
	hook := func(name, resource, path string) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{
			Name:                    name,
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: new(fmt.Sprintf("https://localhost:%d%s", port, path))},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{"spire.spiffe.io"}, APIVersions: []string{"v1alpha1"},
					Resources: []string{resource}},
			}},
		}
	}
	_, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			hook("vclusterfederatedtrustdomain.kb.io", "clusterfederatedtrustdomains", ChartClusterFederatedTrustDomainPath),
			hook("vclusterspiffeid.kb.io", "clusterspiffeids", ChartClusterSPIFFEIDPath),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create ValidatingWebhookConfiguration %s: %w", name, err)
	}
	return nil
}

// CABundlesWritten reports whether every webhook of the configuration carries a CA bundle.
func CABundlesWritten(ctx context.Context, client kubernetes.Interface, name string) (bool, error) {
	vwc, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	for _, h := range vwc.Webhooks {
		if !strings.Contains(string(h.ClientConfig.CABundle), "BEGIN CERTIFICATE") {
			return false, nil
		}
	}
	return true, nil
}
