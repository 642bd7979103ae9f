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

package explain

import (
	"context"
	"fmt"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	spireclientset "github.com/spire-registrar/spire-registrar/generated/clientset/versioned"
	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// EntryLister is what explanations read of SPIRE (pkg/spire.Client).
type EntryLister interface {
	// ListEntries returns every entry.
	ListEntries(ctx context.Context) ([]*spiretypes.Entry, error)
	// ListEntriesWithSelector returns the entries carrying selector.
	ListEntriesWithSelector(ctx context.Context, selector *spiretypes.Selector) ([]*spiretypes.Entry, error)
}

// Source reads what explanations take, with plain gets and lists: it only reads.
type Source struct {
	Kube     kubernetes.Interface
	SpireAPI spireclientset.Interface
	SPIRE    EntryLister
}

// PodInput reads a pod, its namespace, node and EndpointSlices, every ClusterSPIFFEID, and
// SPIRE's entries of the pod (found by its UID selector).
func (s *Source) PodInput(ctx context.Context, namespace, name string) (PodInput, error) {
	pod, err := s.Kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return PodInput{}, fmt.Errorf("getting pod %s/%s: %w", namespace, name, err)
	}
	ns, err := s.Kube.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	if err != nil {
		return PodInput{}, fmt.Errorf("getting namespace %s: %w", namespace, err)
	}
	in := PodInput{Pod: pod, Namespace: ns}
	if in.Node, err = s.node(ctx, pod.Spec.NodeName); err != nil {
		return PodInput{}, err
	}
	if in.EndpointSlices, err = s.endpointSlices(ctx, namespace); err != nil {
		return PodInput{}, err
	}
	if in.ClusterSPIFFEIDs, err = s.clusterSPIFFEIDs(ctx); err != nil {
		return PodInput{}, err
	}
	in.SPIREEntries, err = s.SPIRE.ListEntriesWithSelector(ctx, &spiretypes.Selector{Type: "k8s", Value: render.PodUIDSelectorPrefix + string(pod.UID)})
	if err != nil {
		return PodInput{}, fmt.Errorf("listing SPIRE entries of the pod: %w", err)
	}
	return in, nil
}

// ClusterSPIFFEIDInput reads a ClusterSPIFFEID, every namespace, and the pods it selects in
// namespaces cfg does not ignore, each with its pod input. SPIRE is listed once, in full.
func (s *Source) ClusterSPIFFEIDInput(ctx context.Context, cfg *config.Config, name string) (ClusterSPIFFEIDInput, error) {
	c, err := s.SpireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return ClusterSPIFFEIDInput{}, fmt.Errorf("getting ClusterSPIFFEID %s: %w", name, err)
	}
	in := ClusterSPIFFEIDInput{ClusterSPIFFEID: c}
	namespaces, err := s.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return in, fmt.Errorf("listing namespaces: %w", err)
	}
	for i := range namespaces.Items {
		in.Namespaces = append(in.Namespaces, &namespaces.Items[i])
	}
	compiled := render.CompileClusterSPIFFEID(c)
	if in.ClusterSPIFFEIDs, err = s.clusterSPIFFEIDs(ctx); err != nil {
		return in, err
	}
	var entries map[string][]*spiretypes.Entry
	nodes := map[string]*corev1.Node{}
	for _, ns := range in.Namespaces {
		if !compiled.NamespaceSelector.Matches(labels.Set(ns.Labels)) || cfg.IsNamespaceIgnored(ns.Name) {
			continue
		}
		pods, err := s.Kube.CoreV1().Pods(ns.Name).List(ctx, metav1.ListOptions{LabelSelector: compiled.PodSelector.String()})
		if err != nil {
			return in, fmt.Errorf("listing pods of %s: %w", ns.Name, err)
		}
		if len(pods.Items) == 0 {
			continue
		}
		slices, err := s.endpointSlices(ctx, ns.Name)
		if err != nil {
			return in, err
		}
		if entries == nil {
			if entries, err = s.entriesByPod(ctx); err != nil {
				return in, err
			}
		}
		for i := range pods.Items {
			pod := &pods.Items[i]
			if !compiled.PodSelector.Matches(labels.Set(pod.Labels)) {
				continue // labels.Nothing() lists as everything
			}
			node, ok := nodes[pod.Spec.NodeName]
			if !ok {
				if node, err = s.node(ctx, pod.Spec.NodeName); err != nil {
					return in, err
				}
				nodes[pod.Spec.NodeName] = node
			}
			in.Pods = append(in.Pods, PodInput{Pod: pod, Namespace: ns, Node: node, EndpointSlices: slices,
				SPIREEntries: entries[string(pod.UID)]})
		}
	}
	return in, nil
}

// node returns the named node, or nil when the name is empty or no such node exists.
func (s *Source) node(ctx context.Context, name string) (*corev1.Node, error) {
	if name == "" {
		return nil, nil
	}
	node, err := s.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("getting node %s: %w", name, err)
	}
	return node, nil
}

func (s *Source) endpointSlices(ctx context.Context, namespace string) ([]*discoveryv1.EndpointSlice, error) {
	list, err := s.Kube.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing EndpointSlices of %s: %w", namespace, err)
	}
	out := make([]*discoveryv1.EndpointSlice, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, nil
}

func (s *Source) clusterSPIFFEIDs(ctx context.Context) ([]*spirev1alpha1.ClusterSPIFFEID, error) {
	list, err := s.SpireAPI.SpireV1alpha1().ClusterSPIFFEIDs().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing ClusterSPIFFEIDs: %w", err)
	}
	out := make([]*spirev1alpha1.ClusterSPIFFEID, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, nil
}

// entriesByPod lists SPIRE in full and groups the pod entries by pod UID.
func (s *Source) entriesByPod(ctx context.Context) (map[string][]*spiretypes.Entry, error) {
	all, err := s.SPIRE.ListEntries(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing SPIRE entries: %w", err)
	}
	out := map[string][]*spiretypes.Entry{}
	for _, e := range all {
		if uid := render.PodUIDOf(e); uid != "" {
			out[string(uid)] = append(out[string(uid)], e)
		}
	}
	return out, nil
}
