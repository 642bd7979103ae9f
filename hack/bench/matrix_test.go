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
	"bytes"
	"encoding/csv"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func testPod(name string) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
}

func testEntry(id string, j int, pod corev1.Pod) *spiretypes.Entry {
	return &spiretypes.Entry{
		Id:        id,
		SpiffeId:  &spiretypes.SPIFFEID{TrustDomain: "td", Path: strings.TrimPrefix(kSPIFFEID("td", j, pod.Namespace, pod.Name), "spiffe://td")},
		Selectors: []*spiretypes.Selector{{Type: "k8s", Value: podUIDSelector + string(pod.UID)}},
	}
}

func TestCheckEntries(t *testing.T) {
	a, b := testPod("a"), testPod("b")
	pods := []corev1.Pod{a, b}
	exact := []*spiretypes.Entry{testEntry("1", 0, a), testEntry("2", 1, a), testEntry("3", 0, b), testEntry("4", 1, b)}
	if err := checkEntries(pods, exact, 2, "td"); err != nil {
		t.Fatalf("exact entries: %v", err)
	}
	stray := testEntry("9", 0, testPod("gone"))
	for name, tc := range map[string]struct {
		entries []*spiretypes.Entry
		want    string
	}{
		"missing":   {exact[:3], "pod b has 1 entries, want 2"},
		"duplicate": {append(exact[:3:3], testEntry("5", 0, b)), "2 entries for spiffe://td/k0/ns/ns/pod/b"},
		"stray":     {append(exact[:4:4], stray), "stray entries for pod UID uid-gone"},
		"wrong ID":  {append(exact[:3:3], testEntry("6", 2, b)), "pod b has no entry for spiffe://td/k1/ns/ns/pod/b"},
	} {
		t.Run(name, func(t *testing.T) {
			err := checkEntries(pods, tc.entries, 2, "td")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("checkEntries = %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

func testResults() []cellResult {
	reg := cellResult{
		controller: controllerRegistrar, datastore: datastorePostgres, n: 1000, k: 2,
		ceiling: ceiling{create: 2 * time.Second, list: 100 * time.Millisecond},
		bulk:    3 * time.Second, startup: 150 * time.Millisecond, restartDone: true,
		steady:       []time.Duration{10 * time.Millisecond, 20 * time.Millisecond},
		duringResync: []time.Duration{30 * time.Millisecond},
		resyncDuty:   0.5,
		resyncCPU:    0.2,
		baseline:     memSample{rss: 50 << 20, heapInuse: 5 << 20},
		loaded:       memSample{rss: 51 << 20, heapInuse: 6 << 20},
		idle:         idleCost{window: 30 * time.Second, cpu: 0.01, lists: 0, gcs: 1},
	}
	scm := reg
	scm.controller, scm.startup, scm.duringResync, scm.resyncDuty = controllerSCM, 0, nil, -1
	big := reg
	big.n = 10000
	return []cellResult{reg, scm, big}
}

// TestMatrixReport checks that every line of the table and of the CSV has a value or a
// blank for every column, and that what was not measured is left blank, not zero.
func TestMatrixReport(t *testing.T) {
	results := testResults()
	table := matrixMarkdown(results, options{}, time.Unix(0, 0))
	var rowsSeen int
	for line := range strings.Lines(table) {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		rowsSeen++
		if got, want := strings.Count(line, "|"), len(matrixColumns)+3; got != want {
			t.Errorf("table line has %d bars, want %d: %s", got, want, line)
		}
	}
	if rowsSeen != len(results)+2 {
		t.Errorf("table has %d lines, want a header, a rule and %d results", rowsSeen, len(results))
	}
	if !strings.Contains(table, "| 1000 | 2 | 2000 | 2.00 | 0.100 | 3.00 | 1.50 | 0.150 | 1.50 | 0 |") {
		t.Errorf("spire-registrar's line lacks its ceiling, bulk and start-up figures:\n%s", table)
	}
	data, err := matrixCSV(results)
	if err != nil {
		t.Fatal(err)
	}
	records, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(records) != len(results)+1 {
		t.Fatalf("CSV has %d records, want a header and %d", len(records), len(results))
	}
	col := map[string]int{}
	for i, h := range records[0] {
		col[h] = i
	}
	if got := records[2][col["startup_s"]]; got != "" {
		t.Errorf("spire-controller-manager's start-up is %q, want blank: not measured", got)
	}
	if got := records[1][col["rss_per_pod_bytes"]]; got != "1049" {
		t.Errorf("RSS per pod is %q, want 1049 (1 MiB over 1000 pods)", got)
	}
	if got := records[1][col["idle_cpu_s_per_min"]]; got != "0.020" {
		t.Errorf("idle CPU is %q s/min, want 0.020 (0.01 s over 30 s)", got)
	}
}

// TestPlotsAreSVG checks that every plot is well-formed XML with a legend line per
// controller, datastore and K, and that N is on a log axis when it spans a decade.
func TestPlotsAreSVG(t *testing.T) {
	plots := matrixPlots(testResults())
	for _, name := range []string{"latency.svg", "memory.svg", "times.svg"} {
		c, ok := plots[name]
		if !ok {
			t.Errorf("no %s", name)
			continue
		}
		svg := c.svg()
		dec := xml.NewDecoder(strings.NewReader(svg))
		for {
			_, err := dec.Token()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s is not well-formed: %v\n%s", name, err, svg)
			}
		}
		for _, legend := range []string{"spire-registrar, postgres, K=2", "spire-controller-manager, postgres, K=2"} {
			if !strings.Contains(svg, legend) {
				t.Errorf("%s has no legend line %q", name, legend)
			}
		}
		if !strings.Contains(svg, "N (pods) (log scale)") {
			t.Errorf("%s: N from 1000 to 10000 is not on a log axis", name)
		}
	}
}

func TestAxisTicks(t *testing.T) {
	a := newAxis([]float64{1000, 30000}, 10, 0, 100)
	if !a.log || a.lo != 1000 || a.hi != 100000 {
		t.Errorf("axis of 1000..30000 = %+v, want log from 1000 to 100000", a)
	}
	lin := newAxis([]float64{3, 17}, 100, 0, 100)
	if lin.log || lin.lo != 0 || lin.hi != 20 {
		t.Errorf("axis of 3..17 = %+v, want linear from 0 to 20", lin)
	}
	if got := lin.ticks(); len(got) != 5 || got[1] != 5 || got[4] != 20 {
		t.Errorf("ticks of 0..20 = %v, want 0, 5, 10, 15, 20", got)
	}
}

func TestSumSeries(t *testing.T) {
	exposition := []byte(`# HELP x
spire_registrar_full_resyncs_total{controller="a",result="success"} 3
spire_registrar_full_resyncs_total{controller="a",result="failure"} 1
spire_registrar_full_resyncs_total{controller="b",result="success"} 5
spire_registrar_full_resyncs_total_other{controller="a",result="success"} 7
`)
	got, err := sumSeries(exposition, "spire_registrar_full_resyncs_total", `controller="a"`, `result="success"`)
	if err != nil || got != 3 {
		t.Errorf("sumSeries = %v, %v; want 3", got, err)
	}
}

func TestResyncDuty(t *testing.T) {
	for _, tc := range []struct {
		completed, last float64
		phase           time.Duration
		want            float64
	}{
		{completed: 4, last: 2.5, phase: 20 * time.Second, want: 0.5},
		{completed: 10, last: 3, phase: 20 * time.Second, want: 1},
		{completed: 0, last: 0.1, phase: 20 * time.Second, want: 1},
	} {
		if got := resyncDuty(tc.completed, tc.last, tc.phase); got != tc.want {
			t.Errorf("resyncDuty(%v, %v, %v) = %v, want %v", tc.completed, tc.last, tc.phase, got, tc.want)
		}
	}
}
