package server

import (
	"fmt"
	"html"
	"html/template"
	"strings"
)

// Server-rendered SVG charts: no chart library, no script, nothing the
// CSP must allow. Each chart carries an aria-label summary, and the
// numbers behind it are links elsewhere on the page.

// series is one stacked layer of a column chart.
type series struct {
	Name   string
	Color  string
	Values []int
}

// palette gives series stable colours (colour-blind safe, Okabe-Ito).
var palette = []string{"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#F0E442", "#000000"}

// columnChart draws stacked columns, one per bucket, with an optional
// line (drained, say) over them; labels name the buckets.
func columnChart(title string, labels []string, stacks []series, line *series) template.HTML {
	const w, h, left, bottom, top = 640.0, 220.0, 36.0, 28.0, 10.0
	n := len(labels)
	if n == 0 {
		return ""
	}
	peak := 1
	for i := range n {
		sum := 0
		for _, s := range stacks {
			sum += s.Values[i]
		}
		peak = max(peak, sum)
		if line != nil {
			peak = max(peak, line.Values[i])
		}
	}
	plotH := h - bottom - top
	colW := (w - left) / float64(n)
	y := func(v int) float64 { return top + plotH - plotH*float64(v)/float64(peak) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %.0f %.0f" role="img" aria-label="%s">`, w, h, html.EscapeString(title+": "+chartSummary(stacks, line)))
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#888"/>`, left, top+plotH, w, top+plotH)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" font-size="11" text-anchor="end">%d</text>`, left-4, top+8, peak)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" font-size="11" text-anchor="end">0</text>`, left-4, top+plotH)
	for i := range n {
		x := left + float64(i)*colW
		base := 0
		for _, s := range stacks {
			v := s.Values[i]
			if v == 0 {
				continue
			}
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %d</title></rect>`,
				x+1, y(base+v), max(colW-2, 1), y(base)-y(base+v), s.Color, html.EscapeString(labels[i]), html.EscapeString(s.Name), v)
			base += v
		}
		if n <= 12 || i%(n/8+1) == 0 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" font-size="10" text-anchor="middle">%s</text>`, x+colW/2, h-10, html.EscapeString(labels[i]))
		}
	}
	if line != nil {
		var pts []string
		for i, v := range line.Values {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", left+float64(i)*colW+colW/2, y(v)))
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2.5"><title>%s</title></polyline>`,
			strings.Join(pts, " "), line.Color, html.EscapeString(line.Name))
	}
	b.WriteString(`</svg>`)
	b.WriteString(legend(stacks, line))
	return template.HTML(b.String())
}

func chartSummary(stacks []series, line *series) string {
	var parts []string
	for _, s := range append(stacks, derefSeries(line)...) {
		total := 0
		for _, v := range s.Values {
			total += v
		}
		parts = append(parts, fmt.Sprintf("%s %d", s.Name, total))
	}
	return strings.Join(parts, ", ")
}

func derefSeries(s *series) []series {
	if s == nil {
		return nil
	}
	return []series{*s}
}

func legend(stacks []series, line *series) string {
	var b strings.Builder
	b.WriteString(`<p class="legend muted">`)
	for _, s := range append(stacks, derefSeries(line)...) {
		fmt.Fprintf(&b, `<span><svg width="10" height="10" aria-hidden="true"><rect width="10" height="10" fill="%s"/></svg> %s</span> `, s.Color, html.EscapeString(s.Name))
	}
	b.WriteString(`</p>`)
	return b.String()
}

// barSVG is one horizontal bar, n of peak, for a linked list of counts.
func barSVG(n, peak int) template.HTML {
	if peak < 1 {
		peak = 1
	}
	return template.HTML(fmt.Sprintf(`<svg class="bar" viewBox="0 0 100 8" preserveAspectRatio="none" aria-hidden="true"><rect width="%.1f" height="8" fill="#0072B2"/></svg>`,
		100*float64(n)/float64(peak)))
}
