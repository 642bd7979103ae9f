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
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// namespaceOf groups namespace/name keys by namespace.
func namespaceOf(key string) string {
	ns, _, _ := strings.Cut(key, "/")
	return ns
}

// TestFairQueuePopsGroupsInTurn: each group's keys come out in the order they went in, and
// the groups take turns, a group that empties leaving the rotation and one that comes back
// taking its turn last.
func TestFairQueuePopsGroupsInTurn(t *testing.T) {
	q := newFairQueue(namespaceOf)
	for _, k := range []string{"a/1", "a/2", "a/3", "a/4", "b/1", "c/1", "b/2"} {
		q.Push(k)
	}
	var got []string
	for range 3 {
		got = append(got, q.Pop())
	}
	q.Push("c/2") // c emptied and comes back behind a and b
	for q.Len() > 0 {
		got = append(got, q.Pop())
	}
	want := []string{"a/1", "b/1", "c/1", "a/2", "b/2", "c/2", "a/3", "a/4"}
	if !slices.Equal(got, want) {
		t.Errorf("popped %v, want %v", got, want)
	}
	if len(q.keys) != 0 || len(q.turns) != 0 {
		t.Errorf("an empty queue still holds groups %v and turns %v", q.keys, q.turns)
	}
}

// TestFairQueueFloodDoesNotDelayOtherGroups: with a thousand keys of one namespace queued
// first, a key of another namespace is the second key a worker gets; the workqueue's own
// rules still hold: a key added twice is queued once, and AddAfter delays it.
func TestFairQueueFloodDoesNotDelayOtherGroups(t *testing.T) {
	q := NewFairQueue[string]("", 10, 100, namespaceOf)
	defer q.ShutDown()
	for i := range 1000 {
		q.Add(fmt.Sprintf("flood/%d", i))
	}
	q.Add("flood/0")
	q.Add("quiet/web")
	if q.Len() != 1001 {
		t.Fatalf("Len = %d, want 1001: a key added twice is queued once", q.Len())
	}
	var first []string
	for range 2 {
		k, _ := q.Get()
		first = append(first, k)
		q.Done(k)
	}
	if !slices.Equal(first, []string{"flood/0", "quiet/web"}) {
		t.Errorf("first keys %v, want flood/0 then quiet/web", first)
	}

	q.AddAfter("later/x", 50*time.Millisecond)
	if q.Len() != 999 {
		t.Errorf("Len = %d after AddAfter, want 999: the key is not ready yet", q.Len())
	}
	deadline := time.Now().Add(10 * time.Second)
	for q.Len() != 1000 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	k, _ := q.Get()
	q.Done(k)
	k, _ = q.Get()
	q.Done(k)
	if k != "later/x" {
		t.Errorf("the delayed key of a new group came second after its delay, got %s", k)
	}
}
