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

package podcertificate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/spire-registrar/spire-registrar/pkg/podcert"
	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// identity is what a pod's certificate says: the SPIFFE ID and DNS names one of its
// ClusterSPIFFEIDs renders, and that ClusterSPIFFEID's X509-SVID TTL (0 when not set).
type identity struct {
	spiffeID spiffeid.ID
	dnsNames []string
	ttl      time.Duration
}

// maxFailuresNamed bounds how many render failures a denial names.
const maxFailuresNamed = 3

// identityOf renders the identity the pod's ClusterSPIFFEIDs declare, with the same code and
// inputs as the entry controller renders its entries: the entry of the ClusterSPIFFEID named
// (the request's spire.spiffe.io/clusterspiffeid annotation), or else the entry the entry
// controller prefers, the first of the most preferred ClusterSPIFFEID that renders one. A
// pod with no such entry gets errNoIdentityYet, with the denial it is due: a denial is final,
// and the ClusterSPIFFEIDs, the namespace and the pod may change (a ClusterSPIFFEID applied
// again, or not in the informer yet), so the caller waits before it denies (mayPass).
// Another error means the identity cannot be told yet: the pod, which a template reads more of
// than the cache keeps, cannot be read whole (errInformerLag when the API server no longer
// holds it). A pod in an ignored namespace, which no change short of a restart can give an
// identity, and an identity refused for what it is, are denied at once.
func (c *Controller) identityOf(ctx context.Context, pod *corev1.Pod, node *corev1.Node, named string) (*identity, *podcert.Decision, error) {
	all, err := c.clusterSPIFFEIDLister.List(labels.Everything())
	if err != nil {
		return nil, nil, fmt.Errorf("listing ClusterSPIFFEIDs: %w", err)
	}
	active := c.compiled.Active(all, c.opts.Class.Matches)
	if c.opts.IgnoreNamespace(pod.Namespace) {
		return nil, podcert.Decide(podcert.ReasonNoIdentity, "pod %s/%s is in namespace %s, which the config ignores (ignoreNamespaces, cacheNamespaces)",
			pod.Namespace, pod.Name, pod.Namespace), nil
	}
	ns, err := c.namespaceLister.Get(pod.Namespace)
	if err != nil {
		return nil, nil, fmt.Errorf("getting the namespace of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if render.NeedsWholePod(active, ns, pod) {
		whole, found, err := c.wholePods.Get(ctx, pod)
		if err != nil {
			return nil, nil, err
		}
		if !found {
			return nil, nil, errInformerLag
		}
		pod = whole
	}
	slices, err := c.slices.ForPod(pod.Namespace, pod.Name)
	if err != nil {
		return nil, nil, err
	}
	id, d := c.choose(active, pod, ns, node, slices, named)
	switch {
	case d == nil:
		return id, nil, nil
	case mayPass(d.Reason):
		return nil, nil, errNoIdentityYet{denial: d}
	}
	return nil, d, nil
}

// mayPass reports whether a pod denied for reason may yet get an identity from its
// ClusterSPIFFEIDs, namespace or labels changing: none selects it or renders one for it, or
// not the one named. Other refusals of an identity are final.
func mayPass(reason podcert.Reason) bool {
	return reason == podcert.ReasonNoIdentity || reason == podcert.ReasonClusterSPIFFEIDNotApplicable
}

// choose renders the pod's entries and picks the one that gives its identity.
func (c *Controller) choose(active []*render.ClusterSPIFFEID, pod *corev1.Pod, ns *corev1.Namespace, node *corev1.Node,
	slices []*discoveryv1.EndpointSlice, named string) (*identity, *podcert.Decision) {
	podName := pod.Namespace + "/" + pod.Name
	declared, failures := c.renderer.PodEntries(active, pod, ns, node, slices)
	var chosen *render.DeclaredEntry
	for _, d := range declared {
		if named == "" || d.Declarer.Name == named {
			chosen = d
			break
		}
	}
	if chosen == nil {
		return nil, denial(podName, named, active, failures)
	}
	id, err := spiffeid.FromString(render.SPIFFEIDString(chosen.Entry.GetSpiffeId()))
	if err != nil {
		return nil, podcert.Decide(podcert.ReasonNoIdentity, "ClusterSPIFFEID %s renders an invalid SPIFFE ID for pod %s: %v", chosen.Declarer.Name, podName, err)
	}
	if d := podcert.CheckIdentity(podcert.Identity{ClusterSPIFFEID: chosen.Declarer.Name, SPIFFEID: id,
		Admin: chosen.Entry.GetAdmin(), Downstream: chosen.Entry.GetDownstream()}, c.opts.Identity); d != nil {
		return nil, d
	}
	return &identity{spiffeID: id, dnsNames: chosen.Entry.GetDnsNames(), ttl: time.Duration(chosen.Entry.GetX509SvidTtl()) * time.Second}, nil
}

// denial says why no ClusterSPIFFEID gives a pod an identity: none selects it, the one named
// does not exist, selects it not or fails to render for it, or every one that selects it
// fails to render, naming the first few failures.
func denial(podName, named string, active []*render.ClusterSPIFFEID, failures []render.Failure) *podcert.Decision {
	var why []string
	for _, f := range failures {
		if named != "" && f.ClusterSPIFFEID.Name != named {
			continue
		}
		if len(why) == maxFailuresNamed {
			why = append(why, fmt.Sprintf("%d more", len(failures)-maxFailuresNamed))
			break
		}
		reason := f.Err.Error()
		if errors.Is(f.Err, render.ErrNodeNotFound) {
			reason = "its node is not known"
		}
		why = append(why, fmt.Sprintf("ClusterSPIFFEID %s: %s", f.ClusterSPIFFEID.Name, reason))
	}
	if named == "" {
		if len(why) == 0 {
			return podcert.Decide(podcert.ReasonNoIdentity, "no ClusterSPIFFEID selects pod %s", podName)
		}
		return podcert.Decide(podcert.ReasonNoIdentity, "no ClusterSPIFFEID renders an identity for pod %s: %s", podName, strings.Join(why, "; "))
	}
	if len(why) > 0 {
		return podcert.Decide(podcert.ReasonClusterSPIFFEIDNotApplicable, "ClusterSPIFFEID %s renders no identity for pod %s: %s", named, podName, strings.Join(why, "; "))
	}
	for _, c := range active {
		if c.Name != named {
			continue
		}
		if c.Spec.Fallback {
			return podcert.Decide(podcert.ReasonClusterSPIFFEIDNotApplicable,
				"ClusterSPIFFEID %s is a fallback, and another ClusterSPIFFEID gives pod %s its identity, or it does not select the pod", named, podName)
		}
		return podcert.Decide(podcert.ReasonClusterSPIFFEIDNotApplicable, "ClusterSPIFFEID %s does not select pod %s", named, podName)
	}
	return podcert.Decide(podcert.ReasonClusterSPIFFEIDNotApplicable, "ClusterSPIFFEID %s does not exist (or is not of this signer's class)", named)
}
