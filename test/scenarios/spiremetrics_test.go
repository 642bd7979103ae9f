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

package scenarios

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// entryWriteCounters are the counters SPIRE's telemetry keeps of entry writes: the write
// RPCs of its entry API, and the writes its datastore performs (one per entry).
var entryWriteCounters = []string{
	"spire_server_rpc_entry_v1_entry_batch_create_entry",
	"spire_server_rpc_entry_v1_entry_batch_update_entry",
	"spire_server_rpc_entry_v1_entry_batch_delete_entry",
	"spire_server_datastore_registration_entry_create",
	"spire_server_datastore_registration_entry_update",
	"spire_server_datastore_registration_entry_delete",
}

// sumCounters adds up, per metric name, the samples of the named metrics in a Prometheus
// text exposition, whatever their labels. Names that have no sample yet count zero.
func sumCounters(exposition string, names []string) (map[string]float64, error) {
	sums := make(map[string]float64, len(names))
	for _, n := range names {
		sums[n] = 0
	}
	for line := range strings.Lines(exposition) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(line, "{")
		name, _, _ = strings.Cut(name, " ")
		if _, ok := sums[name]; !ok {
			continue
		}
		// name{labels} value [timestamp], or name value [timestamp]
		rest := line[len(name):]
		if i := strings.LastIndex(rest, "}"); i >= 0 {
			rest = rest[i+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("metric line without a value: %q", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metric line %q: %w", line, err)
		}
		sums[name] += v
	}
	return sums, nil
}

// entryWrites scrapes SPIRE's telemetry and returns its entry write counters.
func (w *world) entryWrites(ctx context.Context) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.spire.MetricsURL(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape spire-server: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape spire-server: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape spire-server: HTTP %d", resp.StatusCode)
	}
	return sumCounters(string(body), entryWriteCounters)
}

func TestSumCounters(t *testing.T) {
	exposition := `# HELP spire_server_datastore_registration_entry_create x
# TYPE spire_server_datastore_registration_entry_create counter
spire_server_datastore_registration_entry_create{host="vm",status="OK"} 3
spire_server_datastore_registration_entry_create{host="vm",status="Internal"} 1
spire_server_datastore_registration_entry_create_elapsed_time_count{host="vm",status="OK"} 3
spire_server_rpc_entry_v1_entry_batch_delete_entry 2e+00
spire_server_rpc_entry_v1_entry_list_entries{host="vm",status="OK"} 7
`
	got, err := sumCounters(exposition, []string{
		"spire_server_datastore_registration_entry_create",
		"spire_server_rpc_entry_v1_entry_batch_delete_entry",
		"spire_server_datastore_registration_entry_update",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"spire_server_datastore_registration_entry_create":   4,
		"spire_server_rpc_entry_v1_entry_batch_delete_entry": 2,
		"spire_server_datastore_registration_entry_update":   0,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sumCounters (-want +got):\n%s", diff)
	}
	if _, err := sumCounters("spire_server_datastore_registration_entry_create{a=\"b\"} x\n", []string{"spire_server_datastore_registration_entry_create"}); err == nil {
		t.Error("sumCounters accepted a value that is no number")
	}
}
