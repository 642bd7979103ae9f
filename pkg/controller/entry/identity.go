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

package entry

import (
	"fmt"
	"sync"
	"text/template"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

// podIdentity is a ClusterSPIFFEID compiled for rendering: its selectors and templates are
// parsed once per generation instead of once per pod.
type podIdentity struct {
	name       string
	uid        types.UID
	generation int64
	created    time.Time
	spec       *spirev1alpha1.ClusterSPIFFEIDSpec

	namespaceSelector labels.Selector
	podSelector       labels.Selector
	spiffeID          *template.Template
	dnsNames          []*template.Template
	workloadSelectors []*template.Template
	federatesWith     []string

	// err is why the spec cannot be compiled. Such an identity still selects pods, so that
	// each is counted as a render failure, but it renders nothing.
	err error
}

// compileIdentity parses a ClusterSPIFFEID. It never fails: a broken spec is kept in err.
func compileIdentity(csid *spirev1alpha1.ClusterSPIFFEID) *podIdentity {
	id := &podIdentity{
		name:       csid.Name,
		uid:        csid.UID,
		generation: csid.Generation,
		created:    csid.CreationTimestamp.Time,
		spec:       &csid.Spec,
	}
	id.err = id.compile()
	if id.namespaceSelector == nil {
		id.namespaceSelector = labels.Nothing()
	}
	if id.podSelector == nil {
		id.podSelector = labels.Nothing()
	}
	return id
}

func (id *podIdentity) compile() error {
	var err error
	if id.namespaceSelector, err = labelSelector(id.spec.NamespaceSelector); err != nil {
		return fmt.Errorf("namespaceSelector: %w", err)
	}
	if id.podSelector, err = labelSelector(id.spec.PodSelector); err != nil {
		return fmt.Errorf("podSelector: %w", err)
	}
	if id.spec.TTL.Duration < 0 {
		return fmt.Errorf("ttl: must not be negative, got %s", id.spec.TTL.Duration)
	}
	if id.spec.JWTTTL.Duration < 0 {
		return fmt.Errorf("jwtTtl: must not be negative, got %s", id.spec.JWTTTL.Duration)
	}
	if id.spiffeID, err = parseTemplate("spiffeIDTemplate", id.spec.SPIFFEIDTemplate); err != nil {
		return err
	}
	for i, text := range id.spec.DNSNameTemplates {
		t, err := parseTemplate(fmt.Sprintf("dnsNameTemplates[%d]", i), text)
		if err != nil {
			return err
		}
		id.dnsNames = append(id.dnsNames, t)
	}
	for i, text := range id.spec.WorkloadSelectorTemplates {
		t, err := parseTemplate(fmt.Sprintf("workloadSelectorTemplates[%d]", i), text)
		if err != nil {
			return err
		}
		id.workloadSelectors = append(id.workloadSelectors, t)
	}
	for i, name := range id.spec.FederatesWith {
		td, err := spiffeid.TrustDomainFromString(name)
		if err != nil {
			return fmt.Errorf("federatesWith[%d]: %w", i, err)
		}
		id.federatesWith = append(id.federatesWith, td.Name())
	}
	return nil
}

// declarer names the identity as the declarer of its entry for a pod.
func (id *podIdentity) declarer(podUID types.UID) declarer {
	return declarer{kind: kindClusterSPIFFEID, name: id.name, created: id.created, podUID: podUID}
}

// labelSelector converts an API label selector; an unset selector selects everything, as in
// spire-controller-manager.
func labelSelector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}

// selects reports whether the identity's selectors match the pod in its namespace.
func (id *podIdentity) selects(ns *corev1.Namespace, pod *corev1.Pod) bool {
	return id.namespaceSelector.Matches(labels.Set(ns.Labels)) && id.podSelector.Matches(labels.Set(pod.Labels))
}

// applicableIdentities returns the identities that apply to a pod: those that select it,
// except that fallback identities apply only when no other one does.
func applicableIdentities(ids []*podIdentity, ns *corev1.Namespace, pod *corev1.Pod) []*podIdentity {
	var regular, fallback []*podIdentity
	for _, id := range ids {
		if !id.selects(ns, pod) {
			continue
		}
		if id.spec.Fallback {
			fallback = append(fallback, id)
		} else {
			regular = append(regular, id)
		}
	}
	if len(regular) > 0 {
		return regular
	}
	return fallback
}

// identityCache keeps compiled identities across syncs, recompiling one only when its UID or
// generation changes (status writes do not change the generation).
type identityCache struct {
	mu    sync.Mutex
	items map[string]*podIdentity
}

func newIdentityCache() *identityCache {
	return &identityCache{items: map[string]*podIdentity{}}
}

// get returns the compiled form of csid.
func (c *identityCache) get(csid *spirev1alpha1.ClusterSPIFFEID) *podIdentity {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id, ok := c.items[csid.Name]; ok && id.uid == csid.UID && id.generation == csid.Generation {
		return id
	}
	id := compileIdentity(csid)
	c.items[csid.Name] = id
	return id
}

// forget drops a deleted ClusterSPIFFEID.
func (c *identityCache) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.items, name)
}
