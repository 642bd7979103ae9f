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

package dropin

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/spiffebundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	spireclientset "github.com/spire-registrar/spire-registrar/generated/clientset/versioned"
	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

const (
	// className is what the chart sets: <namespace>-<release>.
	className = "spire-server-spire"
	// classLabel is the label filterByClassName selects ClusterSPIFFEIDs by.
	classLabel = "spire.spiffe.io/class-name"
	// otherClass belongs to another install on the same cluster and server.
	otherClass = "other-install"

	partnerTD = "partner.test"
	webTD     = "web.test"
	foreignTD = "foreign.test"

	worldTimeout = 2 * time.Minute
)

// deployment is one Deployment of the workload and what it runs.
type deployment struct {
	namespace, name string
	replicas        int32
	app             string
}

// workloadDeployments are the pods the ClusterSPIFFEIDs select. kube-system and
// openshift-monitoring are ignored namespaces: their pods must get no entry.
var workloadDeployments = []deployment{
	{"apps", "web", 3, "web"},
	{"apps", "api", 2, "api"},
	{"apps", "worker", 2, "worker"},
	{"payments", "ledger", 2, "ledger"},
	{"kube-system", "sys", 1, "web"},
	{"openshift-monitoring", "prom", 1, "prom"},
}

// createWorld makes the nodes, namespaces, Deployments and Services, and waits until every pod
// runs Ready with an IP and the Services' Endpoints and EndpointSlices both list their pods.
func createWorld(ctx context.Context, t *testing.T, client kubernetes.Interface) {
	t.Helper()
	for _, node := range []string{"kwok-a", "kwok-b"} {
		if _, err := realcluster.CreateKwokNode(ctx, client, node); err != nil {
			t.Fatal(err)
		}
		if err := realcluster.WaitNodeReady(ctx, client, node); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range []string{"apps", "payments", "kube-system", "openshift-monitoring", "spire-server"} {
		if err := realcluster.EnsureNamespace(ctx, client, ns); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range []string{"apps", "payments"} {
		patch := []byte(`{"metadata":{"labels":{"spiffe":"enabled"}}}`)
		if _, err := client.CoreV1().Namespaces().Patch(ctx, ns, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range workloadDeployments {
		if err := realcluster.WaitServiceAccount(ctx, client, d.namespace, "default"); err != nil {
			t.Fatal(err)
		}
		labels := map[string]string{"app": d.app}
		dep := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: d.namespace, Name: d.name},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To(d.replicas),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: realcluster.PlaceholderImage}}},
				},
			},
		}
		realcluster.KwokPodSpec(&dep.Spec.Template.Spec)
		if _, err := client.AppsV1().Deployments(d.namespace).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"web", "api"} {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{"app": name},
				Ports:    []corev1.ServicePort{{Name: "http", Port: 80}},
			},
		}
		if _, err := client.CoreV1().Services("apps").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range workloadDeployments {
		ips := waitRunning(ctx, t, client, d)
		if d.namespace == "apps" && (d.name == "web" || d.name == "api") {
			waitEndpoints(ctx, t, client, d.namespace, d.name, ips)
		}
	}
}

// waitRunning waits until the Deployment's pods all run Ready with an IP, and returns the IPs.
func waitRunning(ctx context.Context, t *testing.T, client kubernetes.Interface, d deployment) []string {
	t.Helper()
	var ips []string
	var last string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, worldTimeout, true, func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(d.namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + d.app})
		if err != nil {
			return false, nil
		}
		ips = nil
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && podReady(&p) {
				ips = append(ips, p.Status.PodIP)
			}
		}
		last = fmt.Sprintf("%d pods, %d Running and Ready", len(pods.Items), len(ips))
		return len(pods.Items) == int(d.replicas) && len(ips) == int(d.replicas), nil
	})
	if err != nil {
		t.Fatalf("deployment %s/%s: %s: %v", d.namespace, d.name, last, err)
	}
	slices.Sort(ips)
	return ips
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitEndpoints waits until both the v1 Endpoints (what spire-controller-manager reads) and the
// EndpointSlices (what spire-registrar reads) of the Service list exactly these ready IPs.
func waitEndpoints(ctx context.Context, t *testing.T, client kubernetes.Interface, ns, name string, ips []string) {
	t.Helper()
	var fromEndpoints, fromSlices []string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, worldTimeout, true, func(ctx context.Context) (bool, error) {
		fromEndpoints, fromSlices = nil, nil
		//nolint:staticcheck // v1 Endpoints are what spire-controller-manager reads.
		ep, err := client.CoreV1().Endpoints(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, s := range ep.Subsets {
			for _, a := range s.Addresses {
				fromEndpoints = append(fromEndpoints, a.IP)
			}
		}
		list, err := client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
		if err != nil {
			return false, nil
		}
		for _, s := range list.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready {
					fromSlices = append(fromSlices, e.Addresses...)
				}
			}
		}
		slices.Sort(fromEndpoints)
		slices.Sort(fromSlices)
		return slices.Equal(fromEndpoints, ips) && slices.Equal(fromSlices, ips), nil
	})
	if err != nil {
		t.Fatalf("service %s/%s: Endpoints %v, EndpointSlices %v, want both %v: %v", ns, name, fromEndpoints, fromSlices, ips, err)
	}
}

// partnerBundle returns a SPIFFE bundle of partner.test with one self-signed X.509 authority,
// as a user pastes it into trustDomainBundle.
func partnerBundle(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	td := spiffeid.RequireTrustDomainFromString(partnerTD)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{Organization: []string{"partner"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		URIs:                  []*url.URL{td.ID().URL()},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	b := spiffebundle.New(td)
	b.AddX509Authority(cert)
	b.SetRefreshHint(5 * time.Minute)
	data, err := b.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func labelled(class string) map[string]string { return map[string]string{classLabel: class} }

func duration(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }

// createResources declares the workload's identities. Order matters where the tie-breaks of
// masking and of federation conflicts are meant to be exercised.
func createResources(ctx context.Context, t *testing.T, api spireclientset.Interface, bundle string) {
	t.Helper()
	v1 := api.SpireV1alpha1()
	create := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	cftd := func(name, class, td, url string, profile spirev1alpha1.BundleEndpointProfile, bundle string) {
		t.Helper()
		_, err := v1.ClusterFederatedTrustDomains().Create(ctx, &spirev1alpha1.ClusterFederatedTrustDomain{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: spirev1alpha1.ClusterFederatedTrustDomainSpec{
				TrustDomain: td, BundleEndpointURL: url, BundleEndpointProfile: profile, TrustDomainBundle: bundle, ClassName: class,
			},
		}, metav1.CreateOptions{})
		create(err)
	}
	spiffeProfile := spirev1alpha1.BundleEndpointProfile{Type: "https_spiffe", EndpointSPIFFEID: "spiffe://" + partnerTD + "/spire/server"}
	webProfile := spirev1alpha1.BundleEndpointProfile{Type: "https_web"}
	// The federated trust domains come first: entries may federate with partner.test only
	// once SPIRE has its bundle.
	cftd("partner", className, partnerTD, "https://127.0.0.1:1/partner", spiffeProfile, bundle)
	cftd("web-partner", className, webTD, "https://127.0.0.1:1/web", webProfile, "")
	cftd("foreign", otherClass, foreignTD, "https://127.0.0.1:1/foreign", webProfile, "")
	// A second declaration of partner.test, a second later: the older one wins in both.
	time.Sleep(1100 * time.Millisecond)
	cftd("partner-late", className, partnerTD, "https://127.0.0.1:2/late", webProfile, "")

	static := func(name, class, hint string) {
		t.Helper()
		_, err := v1.ClusterStaticEntries().Create(ctx, &spirev1alpha1.ClusterStaticEntry{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: spirev1alpha1.ClusterStaticEntrySpec{
				SPIFFEID:      "spiffe://example.org/db",
				ParentID:      "spiffe://example.org/spire/server",
				Selectors:     []string{"unix:uid:1000", "unix:gid:1000"},
				FederatesWith: []string{partnerTD},
				X509SVIDTTL:   duration(time.Hour),
				JWTSVIDTTL:    duration(5 * time.Minute),
				DNSNames:      []string{"db.example.org", "db"},
				Hint:          hint,
				Admin:         true,
				Downstream:    true,
				ClassName:     class,
			},
		}, metav1.CreateOptions{})
		create(err)
	}
	static("db", className, "db")
	// Same SPIFFE ID, parent and selectors: masked by db in both.
	static("db-shadow", className, "shadow")
	_, err := v1.ClusterStaticEntries().Create(ctx, &spirev1alpha1.ClusterStaticEntry{
		ObjectMeta: metav1.ObjectMeta{Name: "other-static"},
		Spec: spirev1alpha1.ClusterStaticEntrySpec{
			SPIFFEID: "spiffe://example.org/other-static", ParentID: "spiffe://example.org/spire/server",
			Selectors: []string{"unix:uid:2000"}, ClassName: otherClass,
		},
	}, metav1.CreateOptions{})
	create(err)

	id := func(name string, labels map[string]string, spec spirev1alpha1.ClusterSPIFFEIDSpec) {
		t.Helper()
		_, err := v1.ClusterSPIFFEIDs().Create(ctx, &spirev1alpha1.ClusterSPIFFEID{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec:       spec,
		}, metav1.CreateOptions{})
		create(err)
	}
	enabled := &metav1.LabelSelector{MatchLabels: map[string]string{"spiffe": "enabled"}}
	app := func(name string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}
	}
	web := spirev1alpha1.ClusterSPIFFEIDSpec{
		ClassName:                 className,
		NamespaceSelector:         enabled,
		PodSelector:               app("web"),
		SPIFFEIDTemplate:          "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/sa/{{ .PodSpec.ServiceAccountName }}",
		WorkloadSelectorTemplates: []string{"k8s:ns:{{ .PodMeta.Namespace }}", "k8s:sa:{{ .PodSpec.ServiceAccountName }}"},
		DNSNameTemplates:          []string{"{{ .PodMeta.Name }}.web.example.org"},
		AutoPopulateDNSNames:      true,
		TTL:                       duration(time.Hour),
		JWTTTL:                    duration(10 * time.Minute),
		Hint:                      "web",
		FederatesWith:             []string{partnerTD},
	}
	id("web", labelled(className), web)
	// The same entries again, created in the same second: the tie-break decides, and
	// must decide alike in both.
	shadow := web
	shadow.Hint, shadow.TTL = "shadow", duration(2*time.Hour)
	id("web-shadow", labelled(className), shadow)
	id("api", labelled(className), spirev1alpha1.ClusterSPIFFEIDSpec{
		ClassName:         className,
		NamespaceSelector: enabled,
		PodSelector:       app("api"),
		// Built-ins, index and with, as spire-controller-manager's templates allow.
		SPIFFEIDTemplate: `spiffe://{{ .TrustDomain }}/app/{{ index .PodMeta.Labels "app" }}{{ with .PodSpec.NodeName }}/node/{{ . }}{{ end }}/{{ printf "%s" .PodMeta.Name }}`,
		DNSNameTemplates: []string{"{{ .PodMeta.Name }}.api.internal", "api.internal"},
		Admin:            true,
		Downstream:       true,
		TTL:              duration(30 * time.Minute),
	})
	id("ledger", labelled(className), spirev1alpha1.ClusterSPIFFEIDSpec{
		ClassName: className,
		// Two of the three selected namespaces are ignored by the config.
		NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn,
			Values: []string{"payments", "kube-system", "openshift-monitoring"},
		}}},
		SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/ledger/{{ .PodMeta.Name }}",
		JWTTTL:           duration(time.Minute),
		Hint:             "ledger",
	})
	id("catch-all", labelled(className), spirev1alpha1.ClusterSPIFFEIDSpec{
		ClassName:        className,
		Fallback:         true,
		SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/fallback/{{ .PodMeta.Namespace }}/{{ .PodMeta.Name }}",
	})
	// Left alone by both: of our class but without the class label filterByClassName selects
	// by, of another class, and classless (watchClassless is false).
	id("unlabelled", nil, spirev1alpha1.ClusterSPIFFEIDSpec{
		ClassName: className, SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/unlabelled/{{ .PodMeta.Name }}",
	})
	id("other", labelled(otherClass), spirev1alpha1.ClusterSPIFFEIDSpec{
		ClassName: otherClass, SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/other/{{ .PodMeta.Name }}",
	})
	id("classless", nil, spirev1alpha1.ClusterSPIFFEIDSpec{
		SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/classless/{{ .PodMeta.Name }}",
	})
}
