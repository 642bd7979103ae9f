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
	"fmt"
	"time"
)

// Dash patterns that tell a chart's metrics apart; colours tell the series apart.
const (
	dashSolid   = ""
	dashDashed  = "8 4"
	dashDotted  = "2 3"
	dashDashDot = "8 3 2 3"
)

// plotMetric is one metric drawn for every group of results, in one dash pattern.
type plotMetric struct {
	dash string
	// registrarOnly skips spire-controller-manager's groups: its value is not measured, or
	// is the same as spire-registrar's (SPIRE's ceiling).
	registrarOnly bool
	value         func(r cellResult) (float64, bool)
}

// matrixPlots returns the plots of the results against N, by file name: one line per
// controller, datastore and K, and per metric of the plot.
func matrixPlots(results []cellResult) map[string]chart {
	type group struct {
		controller, datastore string
		k                     int
	}
	var groups []group
	byGroup := map[group][]cellResult{}
	for _, r := range results {
		g := group{r.controller, r.datastore, r.k}
		if _, ok := byGroup[g]; !ok {
			groups = append(groups, g)
		}
		byGroup[g] = append(byGroup[g], r)
	}
	build := func(title, yLabel string, notes []string, metrics ...plotMetric) chart {
		c := chart{title: title, xLabel: "N (pods)", yLabel: yLabel, notes: notes}
		for i, g := range groups {
			color := palette[i%len(palette)]
			for j, m := range metrics {
				if m.registrarOnly && g.controller != controllerRegistrar {
					continue
				}
				s := series{color: color, dash: m.dash}
				if j == 0 {
					s.name = fmt.Sprintf("%s, %s, K=%d", g.controller, g.datastore, g.k)
				}
				for _, r := range byGroup[g] {
					if v, ok := m.value(r); ok {
						s.points = append(s.points, point{float64(r.n), v})
					}
				}
				if len(s.points) > 0 || s.name != "" {
					c.series = append(c.series, s)
				}
			}
		}
		return c
	}
	steady := func(r cellResult) []time.Duration { return r.steady }
	resync := func(r cellResult) []time.Duration { return r.duringResync }
	seconds := func(f func(r cellResult) time.Duration) func(r cellResult) (float64, bool) {
		return func(r cellResult) (float64, bool) { return f(r).Seconds(), f(r) > 0 }
	}
	perPod := func(f func(memSample) uint64) func(r cellResult) (float64, bool) {
		return func(r cellResult) (float64, bool) { return r.perPod(f), true }
	}
	return map[string]chart{
		"latency.svg": build("Pod → entry latency", "ms",
			[]string{"solid: p99", "dashed: p50", "dotted: p99 during full resyncs"},
			plotMetric{dash: dashSolid, value: percentileMS(steady, 99)},
			plotMetric{dash: dashDashed, value: percentileMS(steady, 50)},
			plotMetric{dash: dashDotted, registrarOnly: true, value: percentileMS(resync, 99)}),
		"memory.svg": build("Controller memory per pod above the idle baseline", "bytes per pod",
			[]string{"solid: RSS", "dashed: Go heap in use"},
			plotMetric{dash: dashSolid, value: perPod(rss)},
			plotMetric{dash: dashDashed, value: perPod(heap)}),
		"times.svg": build("Times against SPIRE's ceiling", "s",
			[]string{"solid: bulk convergence", "dashed: start-up to ready", "dotted: SPIRE raw create", "dash-dot: SPIRE raw list"},
			plotMetric{dash: dashSolid, value: seconds(func(r cellResult) time.Duration { return r.bulk })},
			plotMetric{dash: dashDashed, registrarOnly: true, value: seconds(func(r cellResult) time.Duration { return r.startup })},
			plotMetric{dash: dashDotted, registrarOnly: true, value: seconds(func(r cellResult) time.Duration { return r.ceiling.create })},
			plotMetric{dash: dashDashDot, registrarOnly: true, value: seconds(func(r cellResult) time.Duration { return r.ceiling.list })}),
	}
}
