package main

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// svg writes SVG elements; every text and attribute value it is given is
// escaped.
type svg struct{ b strings.Builder }

func (s *svg) raw(format string, args ...any) { fmt.Fprintf(&s.b, format, args...) }

// attrs renders name/value pairs as attributes.
func attrs(kv ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(&b, ` %s="%s"`, kv[i], html.EscapeString(kv[i+1]))
	}
	return b.String()
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

// rect draws a rectangle; title, when set, is its tooltip.
func (s *svg) rect(x, y, w, h float64, title string, kv ...string) {
	s.raw(`<rect x="%s" y="%s" width="%s" height="%s"%s>`, num(x), num(y), num(max(w, 0)), num(max(h, 0)), attrs(kv...))
	if title != "" {
		s.raw(`<title>%s</title>`, html.EscapeString(title))
	}
	s.raw("</rect>\n")
}

func (s *svg) line(x1, y1, x2, y2 float64, kv ...string) {
	s.raw(`<line x1="%s" y1="%s" x2="%s" y2="%s"%s/>`+"\n", num(x1), num(y1), num(x2), num(y2), attrs(kv...))
}

func (s *svg) text(x, y float64, text string, kv ...string) {
	s.raw(`<text x="%s" y="%s"%s>%s</text>`+"\n", num(x), num(y), attrs(kv...), html.EscapeString(text))
}

// path draws a polyline through points, broken where a point is NaN.
func (s *svg) path(xs, ys []float64, kv ...string) {
	var d strings.Builder
	pen := false
	for i := range xs {
		if math.IsNaN(ys[i]) {
			pen = false
			continue
		}
		cmd := "L"
		if !pen {
			cmd = "M"
		}
		fmt.Fprintf(&d, "%s%s %s ", cmd, num(xs[i]), num(ys[i]))
		pen = true
	}
	if d.Len() == 0 {
		return
	}
	s.raw(`<path d="%s" fill="none"%s/>`+"\n", strings.TrimSpace(d.String()), attrs(kv...))
}

// The timeline figure: panels stacked on one time axis, so that a fault
// lines up with what it did to rates, waits and leaders.
const (
	figWidth   = 1200.0
	plotLeft   = 150.0 // room for the row names
	plotRight  = 1180.0
	rowHeight  = 18.0
	panelGap   = 34.0
	chartPanel = 150.0
)

// figure is the timeline being drawn: where each time falls across.
type figure struct {
	svg
	from   time.Time
	length time.Duration
	y      float64 // where the next panel starts
}

func (f *figure) x(t time.Time) float64 {
	frac := float64(t.Sub(f.from)) / float64(max(f.length, time.Second))
	return plotLeft + min(max(frac, 0), 1)*(plotRight-plotLeft)
}

// tickEvery is a round step giving about ten ticks over d.
func tickEvery(d time.Duration) time.Duration {
	for _, step := range []time.Duration{5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 30 * time.Minute} {
		if d/step <= 12 {
			return step
		}
	}
	return time.Hour
}

// panelTitle writes a panel's heading and moves below it.
func (f *figure) panelTitle(title, note string) {
	f.y += 22
	f.text(12, f.y, title, "class", "panel-title")
	if note != "" {
		f.text(plotLeft, f.y, note, "class", "note")
	}
	f.y += 10
}

// grid draws the vertical time grid over [top, bottom] and, when labels
// is set, the time labels under it.
func (f *figure) grid(top, bottom float64, labels bool) {
	step := tickEvery(f.length)
	for at := time.Duration(0); at <= f.length; at += step {
		x := f.x(f.from.Add(at))
		f.line(x, top, x, bottom, "class", "grid")
		if labels {
			f.text(x, bottom+13, clock(at), "class", "tick", "text-anchor", "middle")
		}
	}
}

// shade marks every fault's window (and the time after the producers
// stopped) across [top, bottom], and each operator command as a dashed
// line.
func (f *figure) shade(top, bottom float64, faults []faultRecord, ops []opRecord, stopped time.Time) {
	if !stopped.IsZero() {
		x := f.x(stopped)
		f.rect(x, top, plotRight-x, bottom-top, "", "class", "after-run")
	}
	for _, r := range faults {
		x0, x1 := f.x(r.Start), f.x(r.End)
		f.rect(x0, top, max(x1-x0, 1), bottom-top, "", "class", "fault-shade", "fill", faultColour(r.Kind))
	}
	for _, o := range ops {
		x := f.x(o.Start)
		f.line(x, top, x, bottom, "class", "op-line")
	}
}

// faultLane draws one row per node, with a box for each fault over the
// time it touched that node, labelled with its kind where the box is wide
// enough, and a row of operator commands under them.
func (f *figure) faultLane(nodes []string, faults []faultRecord, ops []opRecord, stopped time.Time) {
	f.panelTitle("Faults", "each box: a fault on that node, from when it was applied to when it was healed; ◆ an operator command")
	top := f.y
	rows := len(nodes) + 1
	bottom := top + float64(rows)*rowHeight
	f.shade(top, bottom, nil, ops, stopped)
	f.grid(top, bottom, false)
	for i, n := range nodes {
		y := top + float64(i)*rowHeight
		f.text(plotLeft-8, y+rowHeight-5, n, "class", "row-name", "text-anchor", "end")
		f.line(plotLeft, y+rowHeight, plotRight, y+rowHeight, "class", "row-rule")
	}
	for _, r := range faults {
		x0, x1 := f.x(r.Start), f.x(r.End)
		w := max(x1-x0, 2)
		title := faultTitle(r, f.from)
		for _, n := range r.Nodes {
			i := indexOf(nodes, n)
			if i < 0 {
				continue
			}
			y := top + float64(i)*rowHeight + 2
			f.raw(`<g class="fault" data-kind="%s" data-node="%s">`, html.EscapeString(r.Kind), html.EscapeString(n))
			f.rect(x0, y, w, rowHeight-4, title, "rx", "3", "fill", faultColour(r.Kind))
			// The kind goes inside its box, else after it when the row
			// is free up to the next fault on the node.
			label := float64(len(r.Kind))*6.2 + 6
			switch {
			case label < w:
				f.text(x0+4, y+rowHeight-8, r.Kind, "class", "fault-label")
			case x0+w+label < f.nextFault(faults, n, r.End):
				f.text(x0+w+3, y+rowHeight-8, r.Kind, "class", "fault-label outside", "style", "fill: "+faultColour(r.Kind))
			}
			f.raw("</g>\n")
		}
	}
	y := top + float64(len(nodes))*rowHeight
	f.text(plotLeft-8, y+rowHeight-5, "operators", "class", "row-name", "text-anchor", "end")
	for _, o := range ops {
		x := f.x(o.Start)
		cls := "op"
		if o.Error != "" {
			cls = "op failed"
		}
		title := fmt.Sprintf("%s warrenctl %s: ok", clock(o.Start.Sub(f.from)), o.Command)
		if o.Error != "" {
			title = fmt.Sprintf("%s warrenctl %s: %s", clock(o.Start.Sub(f.from)), o.Command, o.Error)
		}
		cy := y + rowHeight/2
		f.raw(`<path class="%s" data-command="%s" d="M%s %s l5 5 l-5 5 l-5 -5 z"><title>%s</title></path>`+"\n",
			cls, html.EscapeString(o.Command), num(x), num(cy-5), html.EscapeString(title))
	}
	f.y = bottom
}

// nextFault is where the first fault on node after t begins across the
// figure, or the plot's right edge.
func (f *figure) nextFault(faults []faultRecord, node string, t time.Time) float64 {
	next := plotRight
	for _, r := range faults {
		if r.Start.After(t) && slices.Contains(r.Nodes, node) {
			next = min(next, f.x(r.Start))
		}
	}
	return next
}

// faultTitle is a fault's tooltip: kind, nodes, shape, times, errors.
func faultTitle(r faultRecord, from time.Time) string {
	s := fmt.Sprintf("%s %s, %s to %s (%.1f s)", r.Kind, strings.Join(r.Nodes, " "), clock(r.Start.Sub(from)), clock(r.End.Sub(from)), r.End.Sub(r.Start).Seconds())
	if r.Shape != "" {
		s += ": " + r.Shape
	}
	if r.Error != "" {
		s += "; failed: " + r.Error
	}
	if r.HealError != "" {
		s += "; healing failed: " + r.HealError
	}
	return s
}

// series is one line of a chart.
type series struct {
	name, class string
	values      []float64
}

// rateChart draws messages per second.
func (f *figure) rateChart(tl timeline, faults []faultRecord, ops []opRecord, stopped time.Time) {
	f.panelTitle("Messages per second", "")
	all := []series{
		{"published", "published", ints(tl.published)},
		{"confirmed", "confirmed", ints(tl.confirmed)},
		{"delivered", "delivered", ints(tl.delivered)},
	}
	top, bottom := f.y, f.y+chartPanel
	f.shade(top, bottom, faults, ops, stopped)
	f.grid(top, bottom, false)
	peak := 1.0
	for _, s := range all {
		for _, v := range s.values {
			peak = max(peak, v)
		}
	}
	peak = niceCeil(peak)
	yOf := func(v float64) float64 { return bottom - v/peak*(bottom-top) }
	for _, v := range []float64{0, peak / 2, peak} {
		f.line(plotLeft, yOf(v), plotRight, yOf(v), "class", "hgrid")
		f.text(plotLeft-8, yOf(v)+4, strconv.FormatFloat(v, 'f', -1, 64), "class", "tick", "text-anchor", "end")
	}
	f.plot(tl, all, yOf)
	f.legend(all, bottom)
	f.y = bottom
}

// latencyChart draws the confirm waits, p50 and p99, on a log scale.
func (f *figure) latencyChart(tl timeline, faults []faultRecord, ops []opRecord, stopped time.Time) {
	f.panelTitle("Confirm wait", "of the publishes made in each second, log scale")
	all := []series{{"p50", "p50", tl.p50}, {"p99", "p99", tl.p99}}
	top, bottom := f.y, f.y+chartPanel
	f.shade(top, bottom, faults, ops, stopped)
	f.grid(top, bottom, false)
	lo, hi := -3.0, 1.0 // 1 ms to 10 s at least
	for _, s := range all {
		for _, v := range s.values {
			if !math.IsNaN(v) && v > 0 {
				hi = max(hi, math.Ceil(math.Log10(v)))
			}
		}
	}
	yOf := func(v float64) float64 {
		if math.IsNaN(v) {
			return v
		}
		l := math.Log10(max(v, math.Pow(10, lo)))
		return bottom - (l-lo)/(hi-lo)*(bottom-top)
	}
	for e := lo; e <= hi; e++ {
		v := math.Pow(10, e)
		f.line(plotLeft, yOf(v), plotRight, yOf(v), "class", "hgrid")
		f.text(plotLeft-8, yOf(v)+4, seconds(v), "class", "tick", "text-anchor", "end")
	}
	f.plot(tl, all, yOf)
	f.legend(all, bottom)
	f.y = bottom
}

// seconds labels a power of ten of seconds.
func seconds(v float64) string {
	if v < 1 {
		return strconv.FormatFloat(v*1000, 'f', -1, 64) + " ms"
	}
	return strconv.FormatFloat(v, 'f', -1, 64) + " s"
}

// plot draws each series at the middle of its seconds.
func (f *figure) plot(tl timeline, all []series, yOf func(float64) float64) {
	xs := make([]float64, tl.seconds)
	for i := range xs {
		xs[i] = f.x(tl.start.Add(time.Duration(i)*time.Second + time.Second/2))
	}
	for _, s := range all {
		ys := make([]float64, len(s.values))
		for i, v := range s.values {
			ys[i] = yOf(v)
		}
		f.raw(`<g class="series" data-series="%s">`, html.EscapeString(s.name))
		f.path(xs, ys, "class", "line "+s.class)
		f.raw("</g>\n")
	}
}

// legend names the series under a chart, at its right.
func (f *figure) legend(all []series, bottom float64) {
	x := plotRight - float64(len(all))*95
	for _, s := range all {
		f.line(x, bottom+14, x+18, bottom+14, "class", "line "+s.class)
		f.text(x+22, bottom+18, s.name, "class", "legend")
		x += 95
	}
}

// leadershipChart draws one band per queue, coloured by the node leading
// it, blank where no leader was known.
func (f *figure) leadershipChart(bands []leaderBand, nodes []string, faults []faultRecord, ops []opRecord, stopped time.Time) {
	f.panelTitle("Queue leaders", "the node leading each queue, as most nodes said (each by its last answer, up to 5 s old); blank: no leader known (a hibernating queue has none); hatched: some node named another")
	top := f.y
	bottom := top + float64(max(len(bands), 1))*rowHeight
	f.shade(top, bottom, faults, ops, stopped)
	f.grid(top, bottom, true)
	if len(bands) == 0 {
		f.text(plotLeft+8, top+rowHeight-5, "no leadership samples", "class", "note")
	}
	for i, b := range bands {
		y := top + float64(i)*rowHeight
		f.text(plotLeft-8, y+rowHeight-5, b.queue, "class", "row-name", "text-anchor", "end")
		f.raw(`<g class="band" data-queue="%s">`+"\n", html.EscapeString(b.queue))
		for _, s := range b.spans {
			x0, x1 := f.x(s.from), f.x(s.to)
			title := fmt.Sprintf("%s: %s leads, %s to %s", b.queue, s.leader, clock(s.from.Sub(f.from)), clock(s.to.Sub(f.from)))
			if s.disputed {
				title += " (some node named another leader, or none)"
			}
			f.raw(`<g class="lead" data-leader="%s">`, html.EscapeString(s.leader))
			f.rect(x0, y+2, x1-x0, rowHeight-4, title, "fill", nodeColour(s.leader, nodes))
			if s.disputed {
				f.rect(x0, y+2, x1-x0, rowHeight-4, "", "fill", "url(#disputed)")
			}
			f.raw("</g>\n")
		}
		f.raw("</g>\n")
	}
	x := plotLeft
	for _, n := range nodes {
		f.rect(x, bottom+22, 12, 12, "", "fill", nodeColour(n, nodes))
		f.text(x+16, bottom+32, n, "class", "legend")
		x += 100
	}
	f.y = bottom + 36
}

// timelineSVG draws the whole figure.
func timelineSVG(tl timeline, bands []leaderBand, nodes []string, faults []faultRecord, ops []opRecord, stopped time.Time) string {
	f := &figure{from: tl.start, length: time.Duration(tl.seconds) * time.Second}
	f.faultLane(nodes, faults, ops, stopped)
	f.y += 8
	f.rateChart(tl, faults, ops, stopped)
	f.y += panelGap - 16
	f.latencyChart(tl, faults, ops, stopped)
	f.y += panelGap - 16
	f.leadershipChart(bands, nodes, faults, ops, stopped)
	height := f.y + 10
	var out strings.Builder
	fmt.Fprintf(&out, `<svg xmlns="http://www.w3.org/2000/svg" class="timeline" viewBox="0 0 %s %s" role="img" aria-label="the run over time">`+"\n", num(figWidth), num(height))
	out.WriteString(`<defs><pattern id="disputed" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="6" stroke="#ffffff" stroke-width="2" stroke-opacity="0.7"/></pattern></defs>` + "\n")
	out.WriteString(f.b.String())
	out.WriteString("</svg>")
	return out.String()
}

func ints(v []int) []float64 {
	out := make([]float64, len(v))
	for i, n := range v {
		out[i] = float64(n)
	}
	return out
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func indexOf(names []string, name string) int {
	for i, n := range names {
		if n == name {
			return i
		}
	}
	return -1
}

// nodeColours tell the nodes apart in the leadership bands.
var nodeColours = []string{"#3b73b9", "#e08a1e", "#3a9b58", "#c4477a", "#7b5bb5", "#2a9ca6", "#8c6d46"}

// nodeColour is the colour of the node named name among nodes.
func nodeColour(name string, nodes []string) string {
	i := indexOf(nodes, name)
	if i < 0 {
		return "#9aa0a6" // a node the run does not list
	}
	return nodeColours[i%len(nodeColours)]
}

// faultColours tell the kinds of fault apart; a kind not listed gets a
// grey.
var faultColours = map[string]string{
	"kill":          "#d64545",
	"kill-minority": "#a83232",
	"kill-all":      "#6e1f1f",
	"stop":          "#e8833a",
	"pause":         "#d9a400",
	"alarm":         "#2f9e8f",
	"partition":     "#8a5cc7",
	"halves":        "#c0508e",
	"ring":          "#4a69bd",
	"bridge":        "#2d8fb5",
	"oneway":        "#a0703a",
	"loss":          "#7d8b99",
}

func faultColour(kind string) string {
	if c, ok := faultColours[kind]; ok {
		return c
	}
	return "#8d8d8d"
}
