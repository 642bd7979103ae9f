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
	"html"
	"math"
	"slices"
	"strconv"
	"strings"
)

// chart is a line chart of a few series against one x axis, rendered as a standalone SVG by
// svg. An axis turns logarithmic when its values, all positive, span a factor of 10 (x) or
// 100 (y) or more, as N and times do.
type chart struct {
	title, xLabel, yLabel string
	series                []series
	// notes are extra legend lines, e.g. what the dash patterns mean.
	notes []string
}

// series is one line of a chart.
type series struct {
	// name is its legend line; series without one share another's colour and legend line.
	name  string
	color string
	// dash is an SVG stroke-dasharray; empty for a solid line.
	dash   string
	points []point
}

type point struct{ x, y float64 }

const (
	svgWidth, svgHeight           = 980, 500
	plotLeft, plotRight           = 90, 640
	plotTop, plotBottom           = 50, 430
	legendLeft, legendLineSpacing = 665, 18
)

// palette is the series colours, in order; it repeats past its end.
var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"}

// axis maps data values to pixels along one direction.
type axis struct {
	lo, hi   float64
	log      bool
	from, to float64 // pixels of lo and hi
}

func newAxis(values []float64, logAt float64, from, to float64) axis {
	a := axis{from: from, to: to}
	if len(values) == 0 {
		a.lo, a.hi = 0, 1
		return a
	}
	lo, hi := slices.Min(values), slices.Max(values)
	if lo > 0 && hi/lo >= logAt {
		a.log = true
		a.lo, a.hi = math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
		return a
	}
	a.lo, a.hi = min(0, lo), hi
	if a.hi == a.lo {
		a.hi = a.lo + 1
	}
	step := niceStep((a.hi - a.lo) / 5)
	a.hi = math.Ceil(a.hi/step) * step
	return a
}

// niceStep rounds a tick step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*pow >= raw {
			return m * pow
		}
	}
	return 10 * pow
}

func (a axis) pixel(v float64) float64 {
	var f float64
	if a.log {
		f = (math.Log10(v) - math.Log10(a.lo)) / (math.Log10(a.hi) - math.Log10(a.lo))
	} else {
		f = (v - a.lo) / (a.hi - a.lo)
	}
	return a.from + f*(a.to-a.from)
}

// ticks returns the values to label: decades (with 2 and 5 between when there are few) on a
// log axis, about five nice steps on a linear one.
func (a axis) ticks() []float64 {
	var out []float64
	if a.log {
		decades := int(math.Round(math.Log10(a.hi) - math.Log10(a.lo)))
		for d := 0; d <= decades; d++ {
			base := a.lo * math.Pow(10, float64(d))
			out = append(out, base)
			if decades <= 2 && d < decades {
				out = append(out, 2*base, 5*base)
			}
		}
		return out
	}
	step := niceStep((a.hi - a.lo) / 5)
	for v := a.lo; v <= a.hi+step/1000; v += step {
		out = append(out, v)
	}
	return out
}

// tickLabel prints a tick value briefly: 30000, 2.5, 0.005.
func tickLabel(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e9 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// svg renders the chart.
func (c chart) svg() string {
	var xs, ys []float64
	for _, s := range c.series {
		for _, p := range s.points {
			xs, ys = append(xs, p.x), append(ys, p.y)
		}
	}
	x := newAxis(xs, 10, plotLeft, plotRight)
	y := newAxis(ys, 100, plotBottom, plotTop)
	esc := html.EscapeString
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		svgWidth, svgHeight, svgWidth, svgHeight)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", svgWidth, svgHeight)
	fmt.Fprintf(&b, `<text x="%d" y="28" font-size="16" font-weight="bold">%s</text>`+"\n", plotLeft, esc(c.title))
	for _, t := range x.ticks() {
		px := x.pixel(t)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", px, plotTop, px, plotBottom)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", px, plotBottom+16, tickLabel(t))
	}
	for _, t := range y.ticks() {
		py := y.pixel(t)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", plotLeft, py, plotRight, py)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", plotLeft-6, py+4, tickLabel(t))
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="black"/>`+"\n",
		plotLeft, plotTop, plotRight-plotLeft, plotBottom-plotTop)
	scale := func(a axis) string {
		if a.log {
			return " (log scale)"
		}
		return ""
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", (plotLeft+plotRight)/2, plotBottom+40, esc(c.xLabel+scale(x)))
	fmt.Fprintf(&b, `<text transform="translate(%d %d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", 24, (plotTop+plotBottom)/2, esc(c.yLabel+scale(y)))
	legendLines := 0
	for _, s := range c.series {
		pts := slices.Clone(s.points)
		slices.SortFunc(pts, func(a, b point) int { return cmpFloat(a.x, b.x) })
		var path []string
		for _, p := range pts {
			path = append(path, fmt.Sprintf("%.1f,%.1f", x.pixel(p.x), y.pixel(p.y)))
		}
		dash := ""
		if s.dash != "" {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, s.dash)
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", s.color, dash, strings.Join(path, " "))
		for _, p := range path {
			xy := strings.Split(p, ",")
			fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="3" fill="%s"/>`+"\n", xy[0], xy[1], s.color)
		}
		if s.name == "" {
			continue
		}
		ly := plotTop + legendLines*legendLineSpacing
		legendLines++
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", legendLeft, ly, legendLeft+28, ly, s.color, dash)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", legendLeft+34, ly+4, esc(s.name))
	}
	for i, n := range c.notes {
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#555">%s</text>`+"\n", legendLeft, plotTop+(legendLines+1+i)*legendLineSpacing, esc(n))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
