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
	"fmt"
)

// SPIRE's own counters of entry writes. The datastore counters count entries (one per entry a
// batch RPC carries); the RPC counters count batch calls.
const (
	datastoreEntryCreateMetric = "spire_server_datastore_registration_entry_create"
	datastoreEntryUpdateMetric = "spire_server_datastore_registration_entry_update"
	datastoreEntryDeleteMetric = "spire_server_datastore_registration_entry_delete"
	batchCreateEntryRPCMetric  = "spire_server_rpc_entry_v1_entry_batch_create_entry"
	batchUpdateEntryRPCMetric  = "spire_server_rpc_entry_v1_entry_batch_update_entry"
	batchDeleteEntryRPCMetric  = "spire_server_rpc_entry_v1_entry_batch_delete_entry"
)

// entryWrites are SPIRE's entry writes by kind, as its telemetry counts them.
type entryWrites struct {
	creates, updates, deletes          float64
	createRPCs, updateRPCs, deleteRPCs float64
}

// scrapeEntryWrites reads the entry write counters from one scrape of spire-server's
// Prometheus endpoint. A counter SPIRE has not incremented yet is absent and reads as zero.
func scrapeEntryWrites(ctx context.Context, url string) (entryWrites, error) {
	body, err := scrape(ctx, url)
	if err != nil {
		return entryWrites{}, err
	}
	var w entryWrites
	for _, c := range []struct {
		name string
		into *float64
	}{
		{datastoreEntryCreateMetric, &w.creates},
		{datastoreEntryUpdateMetric, &w.updates},
		{datastoreEntryDeleteMetric, &w.deletes},
		{batchCreateEntryRPCMetric, &w.createRPCs},
		{batchUpdateEntryRPCMetric, &w.updateRPCs},
		{batchDeleteEntryRPCMetric, &w.deleteRPCs},
	} {
		if *c.into, err = sumCounter(body, c.name); err != nil {
			return entryWrites{}, fmt.Errorf("scrape %s: %w", c.name, err)
		}
	}
	return w, nil
}

// sub is the writes between two scrapes.
func (w entryWrites) sub(before entryWrites) entryWrites {
	return entryWrites{
		creates: w.creates - before.creates, updates: w.updates - before.updates, deletes: w.deletes - before.deletes,
		createRPCs: w.createRPCs - before.createRPCs, updateRPCs: w.updateRPCs - before.updateRPCs, deleteRPCs: w.deleteRPCs - before.deleteRPCs,
	}
}

// total is every entry written, of any kind.
func (w entryWrites) total() float64 { return w.creates + w.updates + w.deletes }
