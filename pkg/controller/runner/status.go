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

package runner

import (
	"context"
	"fmt"
	"sync/atomic"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// StatusObject is a resource of ours whose status a StatusWriter writes.
type StatusObject[T any] interface {
	metav1.Object
	DeepCopy() T
}

// StatusWriter is the one writer of one kind's status. It writes a status only when it
// changed, never in a dry run or without a client (static mode, where the resources are
// files), and sets the Ready condition only where the installed CRD keeps conditions (see
// ConditionSupport).
type StatusWriter[T StatusObject[T]] struct {
	kind string
	// update is the typed client's UpdateStatus; nil writes nothing.
	update func(context.Context, T, metav1.UpdateOptions) (T, error)
	// conditions points at an object's status.conditions.
	conditions func(T) *[]metav1.Condition
	support    ConditionSupport
}

// NewStatusWriter returns the status writer of kind. update is the typed client's
// UpdateStatus, nil when there is no client; with dryRun it is never called: a dry run writes
// nothing anywhere.
func NewStatusWriter[T StatusObject[T]](kind string, update func(context.Context, T, metav1.UpdateOptions) (T, error), dryRun bool,
	conditions func(T) *[]metav1.Condition) *StatusWriter[T] {
	if dryRun {
		update = nil
	}
	return &StatusWriter[T]{kind: kind, update: update, conditions: conditions}
}

// Write gives obj, as the informer holds it, the status that change makes on a copy, with the
// Ready condition ready. It writes the status when it differs from obj's, and reports whether
// it did differ, written or not, so that the caller can tell of a change once.
func (w *StatusWriter[T]) Write(ctx context.Context, obj T, change func(T), ready metav1.Condition) (changed bool, err error) {
	updated := obj.DeepCopy()
	if change != nil {
		change(updated)
	}
	w.support.Set(w.conditions(updated), ready)
	// Only the status differs between the two, so comparing them compares their status.
	if apiequality.Semantic.DeepEqual(obj, updated) {
		return false, nil
	}
	if w.update == nil {
		return true, nil
	}
	echo, err := w.update(ctx, updated, metav1.UpdateOptions{})
	if err != nil {
		return true, fmt.Errorf("updating status of %s %s: %w", w.kind, obj.GetName(), err)
	}
	w.support.Learn(*w.conditions(updated), *w.conditions(echo))
	klog.FromContext(ctx).V(2).Info("Updated status", "kind", w.kind, "name", obj.GetName(), "ready", ready.Status, "reason", ready.Reason)
	return true, nil
}

// ConditionSupport learns from the echo of a status write whether the installed CRD keeps
// status conditions. spire-controller-manager's own CRDs, which the official chart installs,
// have no status.conditions, so the API server prunes them; comparing with them would find
// every status changed and write it again at every sync, for ever. Once a write comes back
// without the conditions it carried, conditions are left out of every status, and a status
// is written only when what the schema keeps changes.
type ConditionSupport struct {
	pruned atomic.Bool
}

// Set sets a condition, unless the schema prunes conditions.
func (s *ConditionSupport) Set(conditions *[]metav1.Condition, c metav1.Condition) {
	if s.pruned.Load() {
		*conditions = nil
		return
	}
	meta.SetStatusCondition(conditions, c)
}

// Learn records that conditions are pruned when a write that carried some echoes none.
func (s *ConditionSupport) Learn(sent, echoed []metav1.Condition) {
	if len(sent) > 0 && len(echoed) == 0 {
		s.pruned.Store(true)
	}
}
