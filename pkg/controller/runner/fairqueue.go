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
	"k8s.io/client-go/util/workqueue"
)

// NewFairQueue is NewQueue whose ready keys are taken from their groups in turn (group
// names a key's group, e.g. its namespace): a group that floods the queue delays another
// group's key by at most one key of each group ahead of it, not by all of its own keys.
// Adds, delays, retries and metrics are the workqueue's own.
func NewFairQueue[T comparable](name string, qps float64, burst int, group func(T) string) workqueue.TypedRateLimitingInterface[T] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(rateLimiter[T](qps, burst), workqueue.TypedRateLimitingQueueConfig[T]{
		Name: name,
		DelayingQueue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[T]{
			Name: name,
			Queue: workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[T]{
				Name:  name,
				Queue: newFairQueue(group),
			}),
		}),
	})
}

// fairQueue is the storage of a workqueue (workqueue.Queue) that keeps one FIFO per group and
// pops the groups round-robin. The workqueue calls it under its own lock, and never pushes a
// key it already holds.
type fairQueue[T comparable] struct {
	group func(T) string
	// keys are each group's keys in the order they came; a group with none is absent.
	keys map[string][]T
	// turns are the groups that hold keys, the next to pop first.
	turns []string
	len   int
}

func newFairQueue[T comparable](group func(T) string) *fairQueue[T] {
	return &fairQueue[T]{group: group, keys: map[string][]T{}}
}

// Touch keeps a key that is added again where it was.
func (q *fairQueue[T]) Touch(T) {}

// Push appends key to its group's keys; a group that had none takes its turn last.
func (q *fairQueue[T]) Push(key T) {
	g := q.group(key)
	keys, ok := q.keys[g]
	if !ok {
		q.turns = append(q.turns, g)
	}
	q.keys[g] = append(keys, key)
	q.len++
}

// Len is how many keys all groups hold.
func (q *fairQueue[T]) Len() int { return q.len }

// Pop takes the first key of the group whose turn it is; that group, if it holds more, takes
// its next turn after every other group.
func (q *fairQueue[T]) Pop() T {
	g := q.turns[0]
	q.turns[0] = ""
	q.turns = q.turns[1:]
	keys := q.keys[g]
	key := keys[0]
	var zero T
	keys[0] = zero // drop the reference the backing array keeps
	if keys = keys[1:]; len(keys) == 0 {
		delete(q.keys, g)
	} else {
		q.keys[g] = keys
		q.turns = append(q.turns, g)
	}
	q.len--
	return key
}
