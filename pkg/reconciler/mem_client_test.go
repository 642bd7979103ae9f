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

package reconciler

import (
	"context"
	"fmt"
	"sync"
	"time"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/protobuf/proto"

	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

// memClient is an in-memory SPIRE for benchmarks: no gRPC, no validation, just entries by ID.
// Every entry it hands out is a copy, as one decoded from SPIRE's answer is. listDelay stands
// for the time SPIRE takes to list, during which the listed content is fixed.
type memClient struct {
	listDelay time.Duration

	mu      sync.Mutex
	entries map[string]*spiretypes.Entry
	nextID  int
}

var _ spire.EntryClient = (*memClient)(nil)

func newMemClient() *memClient {
	return &memClient{entries: map[string]*spiretypes.Entry{}}
}

func (c *memClient) ListEntries(ctx context.Context) ([]*spiretypes.Entry, error) {
	c.mu.Lock()
	stored := make([]*spiretypes.Entry, 0, len(c.entries))
	for _, e := range c.entries {
		stored = append(stored, e)
	}
	c.mu.Unlock()
	// Copies, as decoding a real list makes (the caller takes entries over), made without
	// holding up writes: stored entries are replaced, never modified.
	out := make([]*spiretypes.Entry, len(stored))
	for i, e := range stored {
		out[i] = proto.CloneOf(e)
	}
	select {
	case <-time.After(c.listDelay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return out, nil
}

func (c *memClient) CreateEntries(_ context.Context, entries []*spiretypes.Entry) ([]spire.EntryResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]spire.EntryResult, len(entries))
	for i, e := range entries {
		e = proto.CloneOf(e)
		if e.Id == "" {
			c.nextID++
			e.Id = fmt.Sprintf("mem-%d", c.nextID)
		}
		e.CreatedAt = time.Now().Unix()
		c.entries[e.Id] = e
		out[i] = spire.EntryResult{Entry: proto.CloneOf(e)}
	}
	return out, nil
}

func (c *memClient) UpdateEntries(_ context.Context, entries []*spiretypes.Entry, mask *spiretypes.EntryMask) ([]spire.EntryResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]spire.EntryResult, len(entries))
	for i, e := range entries {
		cur := c.entries[e.GetId()]
		if cur == nil {
			out[i] = spire.EntryResult{Err: fmt.Errorf("entry %s not found", e.GetId())}
			continue
		}
		// Benchmarks update whole entries: every field the mask names is taken from e.
		next := proto.CloneOf(e)
		next.CreatedAt = cur.GetCreatedAt()
		next.RevisionNumber = cur.GetRevisionNumber() + 1
		c.entries[e.GetId()] = next
		out[i] = spire.EntryResult{Entry: proto.CloneOf(next)}
	}
	return out, nil
}

func (c *memClient) DeleteEntries(_ context.Context, ids []string) ([]spire.DeleteResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]spire.DeleteResult, len(ids))
	for i, id := range ids {
		delete(c.entries, id)
		out[i] = spire.DeleteResult{ID: id}
	}
	return out, nil
}
