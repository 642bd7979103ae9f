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
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	spireclientset "github.com/spire-registrar/spire-registrar/generated/clientset/versioned"
	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

const (
	demoNamespace = "demo"
	demoApp       = "web"
	// demoClusterSPIFFEID is the name of manifests/examples/clusterspiffeid.yaml's ClusterSPIFFEID.
	demoClusterSPIFFEID = "demo-web"
)

// demoEntry is what the demo shows of a SPIRE entry.
type demoEntry struct {
	ID       string
	SPIFFEID string
	DNSNames []string
}

// runDemo applies the demo workload (namespace demo; in the full world a Deployment whose pods
// kwok runs, in the light one Nodes and pods created bound) and the ClusterSPIFFEID of
// manifests/examples, waits until every pod runs (full world) and has its SPIRE entry, and
// prints each pod with its identity.
func runDemo(args []string) error {
	fs := flag.NewFlagSet("demo", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the local-up cluster")
	socket := fs.String("spire-socket", "", "SPIRE server admin API socket")
	light := fs.Bool("light", false, "the light world: create pods bound to nodes, as nothing schedules or runs them")
	replicas := fs.Int("replicas", 3, "pods of the demo Deployment")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long to wait for every pod's entry")
	_ = fs.Parse(args)
	if *kubeconfig == "" || *socket == "" {
		return fmt.Errorf("demo needs --kubeconfig and --spire-socket")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	restConfig, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	spireAPI, err := spireclientset.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	bin, err := realcluster.BinDir()
	if err != nil {
		return err
	}
	spireServer := filepath.Join(bin, realcluster.SPIREServer)

	if err := applyDemo(ctx, client, spireAPI, *light, *replicas); err != nil {
		return err
	}
	start := time.Now()
	var pods []corev1.Pod
	entries := map[string]demoEntry{}
	last := ""
	err = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().Pods(demoNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + demoApp})
		if err != nil {
			return false, nil
		}
		if entries, err = podEntries(ctx, spireServer, *socket); err != nil {
			return false, nil
		}
		pods = list.Items
		running, registered := 0, 0
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
				running++
			}
			if _, ok := entries[string(p.UID)]; ok {
				registered++
			}
		}
		progress := fmt.Sprintf("demo: %d pods, %d Running, %d with their SPIRE entry", len(pods), running, registered)
		if progress != last {
			fmt.Printf("%s (%s)\n", progress, time.Since(start).Round(100*time.Millisecond))
			last = progress
		}
		return len(pods) == *replicas && registered == *replicas && (*light || running == *replicas), nil
	})
	if err != nil {
		return fmt.Errorf("not every demo pod got its entry within %v (last: %s)", *timeout, last)
	}

	fmt.Println()
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "POD\tNODE\tPHASE\tPOD IP\tSPIFFE ID\tDNS NAMES\tENTRY ID")
	for _, p := range pods {
		e := entries[string(p.UID)]
		fmt.Fprintf(w, "%s/%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Namespace, p.Name, p.Spec.NodeName, p.Status.Phase,
			p.Status.PodIP, e.SPIFFEID, strings.Join(e.DNSNames, ","), e.ID)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	// The status is written a second or so after the entries.
	var stats spirev1alpha1.ClusterSPIFFEIDStats
	_ = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		clusterSPIFFEID, err := spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Get(ctx, demoClusterSPIFFEID, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		stats = clusterSPIFFEID.Status.Stats
		return stats.EntriesToSet == *replicas, nil
	})
	fmt.Printf("\nClusterSPIFFEID %s status: %d pods selected, %d entries to set, %d entry failures\n",
		demoClusterSPIFFEID, stats.PodsSelected, stats.EntriesToSet, stats.EntryFailures)
	return nil
}

// applyDemo creates what the demo needs, leaving alone what exists already.
func applyDemo(ctx context.Context, client kubernetes.Interface, spireAPI spireclientset.Interface, light bool, replicas int) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: demoNamespace, Labels: map[string]string{"env": "demo"}}}
	if err := create(client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})); err != nil {
		return err
	}
	labels := map[string]string{"app": demoApp}
	if light {
		for _, node := range []string{"node-a", "node-b"} {
			if err := create(realcluster.CreateNode(ctx, client, node)); err != nil {
				return err
			}
		}
		for i := range replicas {
			name := fmt.Sprintf("%s-%d", demoApp, i+1)
			if err := create(realcluster.CreatePod(ctx, client, demoNamespace, name, []string{"node-a", "node-b"}[i%2],
				func(p *corev1.Pod) { p.Labels = labels })); err != nil {
				return err
			}
		}
		fmt.Printf("demo: created Nodes node-a and node-b and %d pods bound to them (the light world runs none)\n", replicas)
	} else {
		// The ServiceAccount admission plugin needs the namespace's default account first.
		if err := realcluster.WaitServiceAccount(ctx, client, demoNamespace, "default"); err != nil {
			return err
		}
		deployment := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: demoNamespace, Name: demoApp},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To(int32(replicas)),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						Containers: []corev1.Container{{Name: demoApp, Image: realcluster.PlaceholderImage}},
					},
				},
			},
		}
		realcluster.KwokPodSpec(&deployment.Spec.Template.Spec)
		if err := create(client.AppsV1().Deployments(demoNamespace).Create(ctx, deployment, metav1.CreateOptions{})); err != nil {
			return err
		}
		fmt.Printf("demo: created Deployment %s/%s with %d replicas; the scheduler places its pods on the kwok nodes and kwok runs them\n",
			demoNamespace, demoApp, replicas)
	}

	root, err := realcluster.RepoRoot()
	if err != nil {
		return err
	}
	path := filepath.Join(root, "manifests", "examples", "clusterspiffeid.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var clusterSPIFFEID spirev1alpha1.ClusterSPIFFEID
	if err := yaml.UnmarshalStrict(data, &clusterSPIFFEID); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := create(spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, &clusterSPIFFEID, metav1.CreateOptions{})); err != nil {
		return err
	}
	fmt.Printf("demo: created ClusterSPIFFEID %s from %s\n", clusterSPIFFEID.Name, path)
	return nil
}

// create returns a create's error, but for AlreadyExists: the demo may run twice.
func create[T any](_ T, err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// podEntries lists SPIRE's entries through the spire-server CLI and returns those of pods by
// the pod UID they select.
func podEntries(ctx context.Context, spireServer, socket string) (map[string]demoEntry, error) {
	out, err := exec.CommandContext(ctx, spireServer, "entry", "show", "-socketPath", socket, "-output", "json").Output()
	if err != nil {
		return nil, fmt.Errorf("spire-server entry show: %w", err)
	}
	var resp struct {
		Entries []struct {
			ID       string `json:"id"`
			SPIFFEID struct {
				TrustDomain string `json:"trust_domain"`
				Path        string `json:"path"`
			} `json:"spiffe_id"`
			Selectors []struct {
				Type  string `json:"type"`
				Value string `json:"value"`
			} `json:"selectors"`
			DNSNames []string `json:"dns_names"`
		} `json:"entries"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		return nil, fmt.Errorf("decoding spire-server entry show: %w", err)
	}
	byUID := map[string]demoEntry{}
	for _, e := range resp.Entries {
		for _, s := range e.Selectors {
			if uid, ok := strings.CutPrefix(s.Value, "pod-uid:"); ok && s.Type == "k8s" {
				byUID[uid] = demoEntry{ID: e.ID, SPIFFEID: "spiffe://" + e.SPIFFEID.TrustDomain + e.SPIFFEID.Path, DNSNames: e.DNSNames}
			}
		}
	}
	return byUID, nil
}
