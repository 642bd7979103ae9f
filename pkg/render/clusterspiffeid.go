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

package render

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

// What the templates of ClusterSPIFFEIDs may cost, each object and all together. Every
// template is parsed and kept, so without a cap one object of a few MiB full of one-byte
// templates takes gigabytes. The caps are far above real objects, which have a few templates
// of tens of bytes.
const (
	// maxObjectTemplates bounds the templates of one ClusterSPIFFEID: its SPIFFE ID
	// template, DNS name templates and workload selector templates.
	maxObjectTemplates = 128
	// maxObjectTemplateBytes bounds their text together.
	maxObjectTemplateBytes = 64 << 10
	// maxCompiledBytes bounds the memory of the templates compiled for all ClusterSPIFFEIDs:
	// a ClusterSPIFFEID that would pass it renders nothing until others make room.
	maxCompiledBytes = 128 << 20
	// compiledTemplateCost and compiledByteCost bound what a parsed template keeps: a fixed
	// part and a part for each byte of its text (TestCompiledCostBoundsWhatTemplatesKeep).
	compiledTemplateCost = 4 << 10
	compiledByteCost     = 128
)

// ClusterSPIFFEID is a ClusterSPIFFEID compiled for rendering: its selectors and templates are
// parsed once per generation instead of once per pod.
type ClusterSPIFFEID struct {
	Name       string
	UID        types.UID
	Generation int64
	Created    time.Time
	// Deleted is when it was marked for deletion, zero unless it is being deleted.
	Deleted time.Time
	Spec    *spirev1alpha1.ClusterSPIFFEIDSpec

	// NamespaceSelector and PodSelector select the pods it declares entries for.
	NamespaceSelector labels.Selector
	PodSelector       labels.Selector

	spiffeID          *compiledTemplate
	dnsNames          []*compiledTemplate
	workloadSelectors []*compiledTemplate
	federatesWith     []string
	reach             Reach
	// cost bounds the memory its compiled templates keep.
	cost int

	// Err is why the spec cannot be compiled, naming the field. Such a ClusterSPIFFEID still
	// selects pods, so that each is counted as a render failure, but it renders nothing.
	Err error
}

// CompileClusterSPIFFEID parses a ClusterSPIFFEID. It never fails: a broken spec is kept in
// Err, and selects nothing when its selectors are the broken part.
func CompileClusterSPIFFEID(in *spirev1alpha1.ClusterSPIFFEID) *ClusterSPIFFEID {
	c := &ClusterSPIFFEID{
		Name:       in.Name,
		UID:        in.UID,
		Generation: in.Generation,
		Created:    in.CreationTimestamp.Time,
		Deleted:    deletionTime(in.DeletionTimestamp),
		Spec:       &in.Spec,
	}
	c.Err = c.compile()
	if c.Err == nil {
		c.reach = c.templatesReach()
	}
	if c.NamespaceSelector == nil {
		c.NamespaceSelector = labels.Nothing()
	}
	if c.PodSelector == nil {
		c.PodSelector = labels.Nothing()
	}
	return c
}

func (c *ClusterSPIFFEID) compile() error {
	var err error
	if c.cost, err = templatesCost(c.Spec); err != nil {
		return err
	}
	if c.NamespaceSelector, err = labelSelector(c.Spec.NamespaceSelector); err != nil {
		return fmt.Errorf("namespaceSelector: %w", err)
	}
	if c.PodSelector, err = labelSelector(c.Spec.PodSelector); err != nil {
		return fmt.Errorf("podSelector: %w", err)
	}
	if c.Spec.TTL.Duration < 0 {
		return fmt.Errorf("ttl: must not be negative, got %s", c.Spec.TTL.Duration)
	}
	if c.Spec.JWTTTL.Duration < 0 {
		return fmt.Errorf("jwtTtl: must not be negative, got %s", c.Spec.JWTTTL.Duration)
	}
	if c.spiffeID, err = parseTemplate("spiffeIDTemplate", c.Spec.SPIFFEIDTemplate); err != nil {
		return err
	}
	for i, text := range c.Spec.DNSNameTemplates {
		t, err := parseTemplate(fmt.Sprintf("dnsNameTemplates[%d]", i), text)
		if err != nil {
			return err
		}
		c.dnsNames = append(c.dnsNames, t)
	}
	for i, text := range c.Spec.WorkloadSelectorTemplates {
		t, err := parseTemplate(fmt.Sprintf("workloadSelectorTemplates[%d]", i), text)
		if err != nil {
			return err
		}
		c.workloadSelectors = append(c.workloadSelectors, t)
	}
	for i, name := range c.Spec.FederatesWith {
		td, err := spiffeid.TrustDomainFromString(name)
		if err != nil {
			return fmt.Errorf("federatesWith[%d]: %w", i, err)
		}
		c.federatesWith = append(c.federatesWith, td.Name())
	}
	return nil
}

// templatesCost checks a spec's templates against the caps of one object, and returns what
// compiling them may keep.
func templatesCost(spec *spirev1alpha1.ClusterSPIFFEIDSpec) (int, error) {
	n := 1 + len(spec.DNSNameTemplates) + len(spec.WorkloadSelectorTemplates)
	if n > maxObjectTemplates {
		return 0, fmt.Errorf("%d templates, more than the %d one ClusterSPIFFEID may have", n, maxObjectTemplates)
	}
	size := len(spec.SPIFFEIDTemplate)
	for _, text := range append(spec.DNSNameTemplates[:len(spec.DNSNameTemplates):len(spec.DNSNameTemplates)], spec.WorkloadSelectorTemplates...) {
		size += len(text)
	}
	if size > maxObjectTemplateBytes {
		return 0, fmt.Errorf("templates of %d bytes together, more than the %d one ClusterSPIFFEID may have", size, maxObjectTemplateBytes)
	}
	return n*compiledTemplateCost + size*compiledByteCost, nil
}

// withoutTemplates is c refused for err: it keeps its selectors, so that the pods it selects
// count its render failures, and drops its templates.
func (c *ClusterSPIFFEID) withoutTemplates(err error) *ClusterSPIFFEID {
	refused := *c
	refused.spiffeID, refused.dnsNames, refused.workloadSelectors, refused.reach = nil, nil, nil, Reach{}
	refused.cost, refused.Err = 0, err
	return &refused
}

// Declarer names the ClusterSPIFFEID as the declarer of its entry for a pod.
func (c *ClusterSPIFFEID) Declarer(podUID types.UID) Declarer {
	return Declarer{Kind: KindClusterSPIFFEID, Name: c.Name, UID: c.UID, Created: c.Created, Deleted: c.Deleted, PodUID: podUID}
}

// deletionTime is a deletion timestamp as a time, zero when unset.
func deletionTime(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}

// labelSelector converts an API label selector; an unset selector selects everything, as in
// spire-controller-manager.
func labelSelector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}

// Selects reports whether the ClusterSPIFFEID's selectors match the pod in its namespace.
func (c *ClusterSPIFFEID) Selects(ns *corev1.Namespace, pod *corev1.Pod) bool {
	return c.NamespaceSelector.Matches(labels.Set(ns.Labels)) && c.PodSelector.Matches(labels.Set(pod.Labels))
}

// SelectingClusterSPIFFEIDs returns the ClusterSPIFFEIDs whose selectors match a pod, regular
// and fallback ones apart, each in the order given.
func SelectingClusterSPIFFEIDs(all []*ClusterSPIFFEID, ns *corev1.Namespace, pod *corev1.Pod) (regular, fallback []*ClusterSPIFFEID) {
	for _, c := range all {
		if !c.Selects(ns, pod) {
			continue
		}
		if c.Spec.Fallback {
			fallback = append(fallback, c)
		} else {
			regular = append(regular, c)
		}
	}
	return regular, fallback
}

// CompiledClusterSPIFFEIDs keeps ClusterSPIFFEIDs compiled across syncs by name, recompiling
// one only when its UID, generation or deletion time changes (status writes change none of
// them), and keeps the memory of all their templates under maxCompiledBytes. It is safe for
// concurrent use, and compiles outside its lock: one ClusterSPIFFEID's templates never hold up
// a worker that reads another's.
type CompiledClusterSPIFFEIDs struct {
	mu    sync.Mutex
	items map[string]*ClusterSPIFFEID
	// cost is what the compiled templates of items may keep, together.
	cost int
	// compile is CompileClusterSPIFFEID; tests hold it at a gate.
	compile func(*spirev1alpha1.ClusterSPIFFEID) *ClusterSPIFFEID
}

// NewCompiledClusterSPIFFEIDs returns an empty cache.
func NewCompiledClusterSPIFFEIDs() *CompiledClusterSPIFFEIDs {
	return &CompiledClusterSPIFFEIDs{items: map[string]*ClusterSPIFFEID{}, compile: CompileClusterSPIFFEID}
}

// Get returns the compiled form of a ClusterSPIFFEID.
func (c *CompiledClusterSPIFFEIDs) Get(in *spirev1alpha1.ClusterSPIFFEID) *ClusterSPIFFEID {
	if compiled := c.current(in); compiled != nil {
		return compiled
	}
	compiled := c.compile(in)
	c.mu.Lock()
	defer c.mu.Unlock()
	if current := c.currentLocked(in); current != nil {
		return current // Compiled meanwhile by another worker.
	}
	if old, ok := c.items[in.Name]; ok {
		c.cost -= old.cost
	}
	if compiled.cost > maxCompiledBytes-c.cost {
		compiled = compiled.withoutTemplates(fmt.Errorf("the templates of all ClusterSPIFFEIDs would keep more than %d MiB: "+
			"this one renders nothing until others are removed or made smaller", maxCompiledBytes>>20))
	}
	c.items[in.Name] = compiled
	c.cost += compiled.cost
	return compiled
}

// current returns the compiled ClusterSPIFFEID when it is current, else nil.
func (c *CompiledClusterSPIFFEIDs) current(in *spirev1alpha1.ClusterSPIFFEID) *ClusterSPIFFEID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.currentLocked(in)
}

func (c *CompiledClusterSPIFFEIDs) currentLocked(in *spirev1alpha1.ClusterSPIFFEID) *ClusterSPIFFEID {
	compiled, ok := c.items[in.Name]
	if ok && compiled.UID == in.UID && compiled.Generation == in.Generation && compiled.Deleted.Equal(deletionTime(in.DeletionTimestamp)) {
		return compiled
	}
	return nil
}

// Forget drops a deleted ClusterSPIFFEID.
func (c *CompiledClusterSPIFFEIDs) Forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.items[name]; ok {
		c.cost -= old.cost
		delete(c.items, name)
	}
}

// Active returns the compiled ClusterSPIFFEIDs among all whose className matches, most
// preferred first: the ones a controller renders pods with. Those being deleted take part
// until they are gone, as in spire-controller-manager.
func (c *CompiledClusterSPIFFEIDs) Active(all []*spirev1alpha1.ClusterSPIFFEID, matches func(className string) bool) []*ClusterSPIFFEID {
	active := make([]*ClusterSPIFFEID, 0, len(all))
	for _, in := range all {
		if matches(in.Spec.ClassName) {
			active = append(active, c.Get(in))
		}
	}
	SortByPreference(active)
	return active
}

// SortByPreference orders ClusterSPIFFEIDs most preferred first, by Declarer.Compare: the order
// the entry controller renders a pod's entries in, and the one explain shows.
func SortByPreference(clusterSPIFFEIDs []*ClusterSPIFFEID) {
	slices.SortFunc(clusterSPIFFEIDs, func(a, b *ClusterSPIFFEID) int { return a.Declarer("").Compare(b.Declarer("")) })
}
