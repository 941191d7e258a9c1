package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// element is one start tag of the page, with the classes and text of the
// element, and the chain of elements it sits in.
type element struct {
	name    string
	attrs   map[string]string
	parents []*element
	text    strings.Builder
}

func (e *element) class(c string) bool { return slices.Contains(strings.Fields(e.attrs["class"]), c) }

// within returns the nearest enclosing element that matches.
func (e *element) within(match func(*element) bool) *element {
	for i := len(e.parents) - 1; i >= 0; i-- {
		if match(e.parents[i]) {
			return e.parents[i]
		}
	}
	return nil
}

func (e *element) num(attr string, t *testing.T) float64 {
	f, err := strconv.ParseFloat(e.attrs[attr], 64)
	if err != nil {
		t.Fatalf("<%s %s=%q>: %v", e.name, attr, e.attrs[attr], err)
	}
	return f
}

// parsePage parses the page as HTML (with HTML's void elements and
// entities) and returns every element in document order.
func parsePage(t *testing.T, page []byte) []*element {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(page))
	dec.Strict = false
	dec.AutoClose = xml.HTMLAutoClose
	dec.Entity = xml.HTMLEntity
	var all, open []*element
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the page does not parse: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			e := &element{name: tok.Name.Local, attrs: map[string]string{}, parents: slices.Clone(open)}
			for _, a := range tok.Attr {
				e.attrs[a.Name.Local] = a.Value
			}
			all = append(all, e)
			open = append(open, e)
		case xml.EndElement:
			if len(open) > 0 {
				open = open[:len(open)-1]
			}
		case xml.CharData:
			for _, e := range open {
				e.text.Write(tok)
			}
		}
	}
	if len(open) != 0 {
		t.Fatalf("the page leaves %d elements open, the first <%s>", len(open), open[0].name)
	}
	return all
}

// handMadeRun is a 30-second run: two queues, a kill of warren-0 from 9 s
// to 14 s (jepsen-0's leader, which moves to warren-1 after 3 s without
// one), a partition of warren-2 from 20 s to 25 s, a leadership transfer
// at 16 s, and one confirmed message never delivered.
func handMadeRun(t0 time.Time) (report, *history) {
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	h := newHistory(nil)
	for s := 0; s < 30; s++ {
		for k := range 10 {
			q := "jepsen-" + strconv.Itoa(k%2)
			id := h.publish(q, "warren-1")
			r := h.msgs[id]
			r.published = at(float64(s) + float64(k)/10)
			wait := 0.005
			if s >= 9 && s < 14 && q == "jepsen-0" {
				wait = 14.2 - float64(s) // held until the new leader
			}
			if id == 42 {
				r.confirmed = at(float64(s) + 0.5)
				continue // lost
			}
			r.confirmed = r.published.Add(time.Duration(wait * float64(time.Second)))
			r.deliveries = []delivery{{queue: q, at: r.confirmed.Add(time.Millisecond), via: "warren-2", ack: ackOK}}
		}
	}
	for s := 0; s < 30; s++ {
		for _, via := range []string{"warren-0", "warren-1", "warren-2"} {
			if via == "warren-0" && s >= 9 && s < 14 {
				continue // down
			}
			lead := map[string]string{"jepsen-0": "warren-0", "jepsen-1": "warren-2"}
			switch {
			case s >= 9 && s < 12:
				lead["jepsen-0"] = ""
			case s >= 12:
				lead["jepsen-0"] = "warren-1"
			}
			h.recordLeaders(leaderSample{At: at(float64(s) + 0.3), Via: via, Leaders: lead})
		}
	}
	rep := report{
		Seed: 7, Nodes: 3, Faults: []string{"kill", "partition"}, Ops: []string{"transfer"},
		Began: t0, Stopped: at(28),
		FaultLog: []faultRecord{
			{Kind: "kill", Nodes: []string{"warren-0"}, Start: at(9), End: at(14)},
			{Kind: "partition", Nodes: []string{"warren-2"}, Start: at(20), End: at(25)},
		},
		FaultCounts: map[string]int{"kill": 1, "partition": 1},
		OpLog:       []opRecord{{Command: "transfer leadership jepsen-1 warren-0", Start: at(16), End: at(16.2)}},
		Flags:       map[string]string{"duration": "28s", "seed": "7"},
		Events:      []string{"00:00:09.000 kill warren-0"},
	}
	return rep, h
}

// TestReportPageShowsFaultsLeadersAndVerdicts renders a hand-made run and
// reads the page back as a browser would parse it: a box per fault on its
// node's row, placed at its time; each queue's leaders as bands in node
// order with the leaderless seconds left blank; the operator command
// marked; and the verdict's rows, the lost message failing with its story.
func TestReportPageShowsFaultsLeadersAndVerdicts(t *testing.T) {
	t0 := time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC)
	rep, h := handMadeRun(t0)
	v := h.check()
	var page bytes.Buffer
	if err := renderReport(&page, rep, h, v); err != nil {
		t.Fatal(err)
	}
	all := parsePage(t, page.Bytes())
	for _, e := range all {
		if e.name == "script" || e.attrs["src"] != "" || strings.HasPrefix(e.attrs["href"], "http") {
			t.Errorf("the page loads something: <%s %v>", e.name, e.attrs)
		}
	}

	// Where a second falls across the figure: the fault boxes must sit
	// at their times.
	xOf := func(s float64) float64 { return plotLeft + s/30*(plotRight-plotLeft) }
	type box struct {
		kind, node string
		x0, x1     float64
	}
	var boxes []box
	for _, e := range all {
		g := e.within(func(p *element) bool { return p.name == "g" && p.class("fault") })
		if e.name != "rect" || g == nil {
			continue
		}
		x := e.num("x", t)
		boxes = append(boxes, box{g.attrs["data-kind"], g.attrs["data-node"], x, x + e.num("width", t)})
	}
	if len(boxes) != 2 {
		t.Fatalf("fault boxes %+v, want the kill and the partition", boxes)
	}
	for i, want := range []box{{"kill", "warren-0", xOf(9), xOf(14)}, {"partition", "warren-2", xOf(20), xOf(25)}} {
		got := boxes[i]
		if got.kind != want.kind || got.node != want.node || abs(got.x0-want.x0) > 1 || abs(got.x1-want.x1) > 1 {
			t.Errorf("fault box %d = %+v, want %+v", i, got, want)
		}
	}

	type span struct {
		leader string
		x0, x1 float64
	}
	bands := map[string][]span{}
	for _, e := range all {
		lead := e.within(func(p *element) bool { return p.name == "g" && p.class("lead") })
		if e.name != "rect" || lead == nil || e.attrs["fill"] == "url(#disputed)" {
			continue
		}
		q := e.within(func(p *element) bool { return p.name == "g" && p.class("band") }).attrs["data-queue"]
		x := e.num("x", t)
		sp := span{lead.attrs["data-leader"], x, x + e.num("width", t)}
		// A stretch drawn in two pieces (disputed seconds apart) is one.
		if n := len(bands[q]); n > 0 && bands[q][n-1].leader == sp.leader && abs(bands[q][n-1].x1-sp.x0) < 0.5 {
			bands[q][n-1].x1 = sp.x1
			continue
		}
		bands[q] = append(bands[q], sp)
	}
	if len(bands) != 2 {
		t.Fatalf("leadership bands for %d queues, want 2: %+v", len(bands), bands)
	}
	q0 := bands["jepsen-0"]
	if len(q0) != 2 || q0[0].leader != "warren-0" || q0[1].leader != "warren-1" {
		t.Fatalf("jepsen-0's leaders %+v, want warren-0 then warren-1", q0)
	}
	if abs(q0[0].x1-xOf(9)) > 1 || abs(q0[1].x0-xOf(12)) > 1 || abs(q0[1].x1-xOf(30)) > 1 {
		t.Errorf("jepsen-0's leaders %+v: want warren-0 until 9 s, nobody until 12 s, warren-1 to the end", q0)
	}
	// warren-0's last answer before it was killed (8.3 s) still named
	// itself when the others named warren-1, until it lapsed.
	var disputed []float64
	for _, e := range all {
		if e.name == "rect" && e.attrs["fill"] == "url(#disputed)" {
			disputed = append(disputed, e.num("x", t), e.num("x", t)+e.num("width", t))
		}
	}
	if len(disputed) != 2 || abs(disputed[0]-xOf(12)) > 1 || abs(disputed[1]-xOf(13)) > 1 {
		t.Errorf("disputed stretches at %v, want 12 s to 13 s", disputed)
	}
	if q1 := bands["jepsen-1"]; len(q1) != 1 || q1[0].leader != "warren-2" || abs(q1[0].x0-xOf(0)) > 1 {
		t.Errorf("jepsen-1's leaders %+v, want warren-2 throughout", q1)
	}
	if c0, c1 := fillOf(all, "warren-0"), fillOf(all, "warren-1"); c0 == c1 || c0 == "" {
		t.Errorf("leaders warren-0 and warren-1 drawn in %q and %q: not told apart", c0, c1)
	}

	var ops []string
	for _, e := range all {
		if e.name == "path" && e.class("op") {
			ops = append(ops, e.attrs["data-command"])
		}
	}
	if !slices.Equal(ops, []string{"transfer leadership jepsen-1 warren-0"}) {
		t.Errorf("operator marks %q, want the transfer", ops)
	}

	rows := map[string]*element{}
	cells := map[string][]string{}
	for _, e := range all {
		if e.name == "tr" && e.attrs["data-check"] != "" {
			rows[e.attrs["data-check"]] = e
		}
		if tr := e.within(func(p *element) bool { return p.name == "tr" && p.attrs["data-check"] != "" }); e.name == "td" && tr != nil {
			cells[tr.attrs["data-check"]] = append(cells[tr.attrs["data-check"]], strings.TrimSpace(e.text.String()))
		}
	}
	for _, check := range []string{"lost", "unexpected", "duplicated", "unflagged redeliveries", "misrouted", "stranded", "refused after healing", "nodes exited unasked", "could not observe"} {
		if rows[check] == nil {
			t.Errorf("no verdict row %q", check)
		}
	}
	lost := cells["lost"]
	if len(lost) != 5 || lost[2] != "1" || lost[3] != "FAIL" || !strings.HasPrefix(lost[4], "42: published to jepsen-1") || !rows["lost"].class("failed") {
		t.Errorf("the lost row reads %q, want 1, FAIL and message 42's story", lost)
	}
	if dup := cells["duplicated"]; len(dup) != 5 || dup[2] != "0" || dup[3] != "pass" {
		t.Errorf("the duplicated row reads %q, want 0 and pass", dup)
	}
	var title string
	for _, e := range all {
		if e.name == "title" && e.parents[len(e.parents)-1].name == "head" {
			title = e.text.String()
		}
	}
	if !strings.Contains(title, "FAIL") {
		t.Errorf("page title %q does not say the run failed", title)
	}
}

func fillOf(all []*element, leader string) string {
	for _, e := range all {
		if g := e.within(func(p *element) bool { return p.class("lead") }); e.name == "rect" && g != nil && g.attrs["data-leader"] == leader {
			return e.attrs["fill"]
		}
	}
	return ""
}

func abs(f float64) float64 { return max(f, -f) }

// TestReportCommandRewritesThePage: `jepsen report DIR` makes the page
// from the files a run left, the leadership samples read back from
// history.jsonl; a directory without a history is an error, not a panic.
func TestReportCommandRewritesThePage(t *testing.T) {
	dir := t.TempDir()
	rep, h := handMadeRun(time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC))
	v := h.check()
	if err := writeHistoryFile(filepath.Join(dir, historyFile), h, facts{Stranded: v.Stranded, Crashed: v.Crashed, Nodes: rep.Nodes}); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := reportExit([]string{dir}, &out, &errOut); code != 0 {
		t.Fatalf("jepsen report: exit %d: %s", code, errOut.String())
	}
	page, err := os.ReadFile(filepath.Join(dir, reportPage))
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := renderReport(&want, rep, h, v); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(page, want.Bytes()) {
		t.Error("the page made offline differs from the one made from the run's own history")
	}
	leads := 0
	for _, e := range parsePage(t, page) {
		if e.name == "g" && e.class("lead") {
			leads++
		}
	}
	if leads != 4 {
		t.Errorf("offline page has %d leadership spans, want 4", leads)
	}

	if code := reportExit([]string{t.TempDir()}, &out, &errOut); code != 2 {
		t.Errorf("jepsen report on a directory without a history: exit %d, want 2", code)
	}
	if code := reportExit(nil, &out, &errOut); code != 2 {
		t.Errorf("jepsen report without a directory: exit %d, want 2", code)
	}
}

// TestLeaderOfASecondIsTheMajorityView: a node cut off from the others
// may name a stale leader; the band follows most nodes and marks the
// second disputed. A node's answer stands for it while it gives no newer
// one, up to leaderViewLasts; a second where most know no leader, or no
// answer stands, is a gap.
func TestLeaderOfASecondIsTheMajorityView(t *testing.T) {
	t0 := time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC)
	sec := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	sample := func(s int, via, leader string) leaderSample {
		return leaderSample{At: sec(s).Add(100 * time.Millisecond), Via: via, Leaders: map[string]string{"q": leader}}
	}
	samples := []leaderSample{
		sample(0, "a", "n1"), sample(0, "b", "n1"), sample(0, "c", "n1"),
		sample(1, "a", "n1"), sample(1, "b", "n2"), sample(1, "c", "n2"), // a, cut off, names the old one
		sample(2, "a", ""), sample(2, "b", ""), sample(2, "c", "n2"),
		sample(3, "a", "n2"), sample(3, "b", "n2"), sample(3, "c", "n2"),
		// Nobody answers in second 4; b alone answers from 5 to 7.
		sample(5, "b", "n2"), sample(6, "b", "n2"), sample(7, "b", "n3"),
		// Then nobody for good.
	}
	bands := leaderBands(samples, t0, 16)
	if len(bands) != 1 {
		t.Fatalf("bands %+v", bands)
	}
	got := bands[0].spans
	want := []leaderSpan{
		{from: sec(0), to: sec(1), leader: "n1"},
		{from: sec(1), to: sec(2), leader: "n2", disputed: true},
		// Second 2: most know none. Seconds 3 to 6 all name n2, a and c
		// by their answers of second 3; in second 7 (ending at 8, within
		// 5 s of 3.1) those still stand against b's n3.
		{from: sec(3), to: sec(7), leader: "n2"},
		{from: sec(7), to: sec(8), leader: "n2", disputed: true},
		// b's last answer stands until 12.1 s: through the second ending at 12.
		{from: sec(8), to: sec(12), leader: "n3"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("spans\n%+v\nwant\n%+v", got, want)
	}
}

// TestReportOfAnEmptyRun: a run that ended before any client started
// still gets a page, which says so rather than failing.
func TestReportOfAnEmptyRun(t *testing.T) {
	var page bytes.Buffer
	if err := renderReport(&page, report{}, newHistory(nil), verdict{}); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range parsePage(t, page.Bytes()) {
		found = found || e.name == "text" && strings.TrimSpace(e.text.String()) == "no leadership samples"
	}
	if !found {
		t.Error("an empty run's page does not say it has no leadership samples")
	}
}
