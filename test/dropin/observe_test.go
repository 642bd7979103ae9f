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

package dropin

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// snapshot is everything a swap must leave as it was: SPIRE's entries (every field, IDs and
// revision numbers included) and federation relationships, and the status the controller
// wrote on each resource, as the apiserver stores it after pruning.
type snapshot struct {
	Entries       []realcluster.Entry
	Relationships []realcluster.FederationRelationship
	// Status maps "<kind>/<name>" to the resource's status.
	Status map[string]any
}

var resources = map[string]schema.GroupVersionResource{
	"ClusterSPIFFEID":             {Group: "spire.spiffe.io", Version: "v1alpha1", Resource: "clusterspiffeids"},
	"ClusterStaticEntry":          {Group: "spire.spiffe.io", Version: "v1alpha1", Resource: "clusterstaticentries"},
	"ClusterFederatedTrustDomain": {Group: "spire.spiffe.io", Version: "v1alpha1", Resource: "clusterfederatedtrustdomains"},
}

func takeSnapshot(ctx context.Context, spire *realcluster.SPIRE, dyn dynamic.Interface) (snapshot, error) {
	var s snapshot
	var err error
	if s.Entries, err = spire.EntryShow(ctx); err != nil {
		return s, err
	}
	slices.SortFunc(s.Entries, func(a, b realcluster.Entry) int { return strings.Compare(a.ID, b.ID) })
	if s.Relationships, err = spire.FederationShow(ctx); err != nil {
		return s, err
	}
	slices.SortFunc(s.Relationships, func(a, b realcluster.FederationRelationship) int {
		return strings.Compare(a.TrustDomain, b.TrustDomain)
	})
	s.Status = map[string]any{}
	for kind, gvr := range resources {
		list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			return s, err
		}
		for _, item := range list.Items {
			if status, ok := item.Object["status"]; ok {
				s.Status[kind+"/"+item.GetName()] = status
			}
		}
	}
	return s, nil
}

// writeMetric matches SPIRE's counters of calls that write entries or federation
// relationships: the API's batch RPCs and, below them, the datastore's per-item operations.
var writeMetric = regexp.MustCompile(`^spire_server_(rpc_entry_v1_entry_batch_(create|update|delete)_entry|rpc_trustdomain_v1_trust_domain_batch_(create|update|delete)_federation_relationship|datastore_(registration_entry|federation_relationship)_(create|update|delete))$`)

// counters maps a metric name to its value summed over labels.
type counters map[string]float64

// scrape reads the Prometheus endpoint and returns the metrics whose names match, each summed
// over its labels.
func scrape(ctx context.Context, url string, match *regexp.Regexp) (counters, error) {
	series, err := scrapeSeries(ctx, url, match)
	if err != nil {
		return nil, err
	}
	c := counters{}
	for s, v := range series {
		name, _, _ := strings.Cut(s, "{")
		c[name] += v
	}
	return c, nil
}

// scrapeSeries reads the Prometheus endpoint and returns each series, name{labels}, whose
// metric name matches.
func scrapeSeries(ctx context.Context, url string, match *regexp.Regexp) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
	}
	return parseSeries(resp.Body, match)
}

// parseSeries parses Prometheus' text format and returns each series, name{labels}, whose
// metric name matches.
func parseSeries(r io.Reader, match *regexp.Regexp) (map[string]float64, error) {
	series := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		// name{labels} value, or name value; label values may hold spaces.
		end := strings.LastIndexByte(line, '}') + 1
		if end == 0 {
			end = strings.IndexByte(line, ' ')
		}
		if end <= 0 {
			continue
		}
		key := line[:end]
		name, _, _ := strings.Cut(key, "{")
		if !match.MatchString(name) {
			continue
		}
		fields := strings.Fields(line[end:])
		if len(fields) == 0 {
			return nil, fmt.Errorf("metric line %q has no value", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metric line %q: %w", line, err)
		}
		series[key] += v
	}
	return series, sc.Err()
}

var apiserverRequests = regexp.MustCompile(`^apiserver_request_total$`)

// statusWrites returns how many writes of the status of our three kinds kube-apiserver has
// served, as its own apiserver_request_total counts them.
func statusWrites(ctx context.Context, client kubernetes.Interface) (float64, error) {
	data, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, err
	}
	series, err := parseSeries(bytes.NewReader(data), apiserverRequests)
	if err != nil {
		return 0, err
	}
	var n float64
	for s, v := range series {
		if strings.Contains(s, `group="spire.spiffe.io"`) && strings.Contains(s, `subresource="status"`) &&
			(strings.Contains(s, `verb="PUT"`) || strings.Contains(s, `verb="PATCH"`) || strings.Contains(s, `verb="APPLY"`)) {
			n += v
		}
	}
	return n, nil
}

// statusWritesDuring counts status writes of our kinds over d.
func statusWritesDuring(ctx context.Context, t *testing.T, client kubernetes.Interface, d time.Duration) float64 {
	t.Helper()
	before, err := statusWrites(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(d)
	after, err := statusWrites(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	return after - before
}

// sub returns the counts added since before, leaving out those that did not change.
func (c counters) sub(before counters) counters {
	d := counters{}
	for name, v := range c {
		if v != before[name] {
			d[name] = v - before[name]
		}
	}
	return d
}

// waitSteady waits until the snapshot and SPIRE's write counters stay the same for quiet, and
// returns them. check is applied to every snapshot and must pass at the end.
func waitSteady(ctx context.Context, t *testing.T, spire *realcluster.SPIRE, dyn dynamic.Interface, quiet time.Duration, check func(snapshot) error) (snapshot, counters) {
	t.Helper()
	var last snapshot
	var lastWrites counters
	var since time.Time
	var why string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := takeSnapshot(ctx, spire, dyn)
		if err != nil {
			// Keep why: at the deadline, the reason is what the last complete look found.
			return false, nil
		}
		writes, err := scrape(ctx, spire.MetricsURL(), writeMetric)
		if err != nil {
			return false, nil
		}
		if !cmp.Equal(s, last) || !cmp.Equal(writes, lastWrites) {
			last, lastWrites, since = s, writes, time.Now()
			why = "changing"
			return false, nil
		}
		if err := check(s); err != nil {
			why = err.Error()
			since = time.Now()
			return false, nil
		}
		return time.Since(since) >= quiet, nil
	})
	if err != nil {
		t.Fatalf("no steady state (%s): %v", why, err)
	}
	return last, lastWrites
}

// withoutKnownStatusDifferences checks the two ways the statuses the two programs write are
// known to differ, and returns the snapshot without them, so that everything else can be
// compared as it is:
//   - ClusterStaticEntry status.set: spire-controller-manager 0.7.0 sets it only in the pass
//     that created the entry, so at steady state it is false; spire-registrar sets it while
//     SPIRE holds the entry, i.e. when the entry rendered and is not masked.
//   - ClusterFederatedTrustDomain: spire-controller-manager writes no status; spire-registrar
//     writes a Ready condition, which spire-controller-manager's CRDs prune to `status: {}`.
//
// byRegistrar says which program wrote the statuses last.
func withoutKnownStatusDifferences(t *testing.T, s snapshot, byRegistrar bool) snapshot {
	t.Helper()
	out := s
	out.Status = map[string]any{}
	for key, status := range s.Status {
		kind, _, _ := strings.Cut(key, "/")
		m, _ := status.(map[string]any)
		switch kind {
		case "ClusterFederatedTrustDomain":
			if len(m) != 0 {
				t.Errorf("%s has status %v, want none or an empty one", key, status)
			}
			continue
		case "ClusterStaticEntry":
			want := false
			if byRegistrar {
				want = m["rendered"] == true && m["masked"] == false
			}
			if m["set"] != want {
				t.Errorf("%s status.set = %v, want %v", key, m["set"], want)
			}
			copied := map[string]any{}
			for k, v := range m {
				if k != "set" {
					copied[k] = v
				}
			}
			status = copied
		}
		out.Status[key] = status
	}
	return out
}
