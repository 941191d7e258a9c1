package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// reportPage is the run directory's report for people: one HTML file,
// its charts inline SVG, its style inline CSS, no script and nothing
// fetched, so it opens from a copied directory or a CI artefact alike.
const reportPage = "index.html"

// writeReportPage writes dir/index.html from a run's report, history and
// verdict.
func writeReportPage(dir string, rep report, h *history, v verdict) error {
	f, err := os.Create(filepath.Join(dir, reportPage))
	if err != nil {
		return err
	}
	if err := renderReport(f, rep, h, v); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// reportExit is `jepsen report RUN_DIR`: index.html written again from the
// history.jsonl and report.json a run left, offline.
func reportExit(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, "Usage: jepsen report RUN_DIR\n\nWrites RUN_DIR/index.html again from the history.jsonl and report.json a run wrote in RUN_DIR (its --dir).")
		return 2
	}
	dir := args[0]
	file, err := os.Open(filepath.Join(dir, historyFile))
	if err != nil {
		fmt.Fprintln(stderr, "report:", err)
		return 2
	}
	h, f, err := readHistory(file)
	file.Close()
	if err != nil {
		fmt.Fprintf(stderr, "report: %s: %v\n", file.Name(), err)
		return 2
	}
	v := h.check()
	f.apply(&v)
	var rep report
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// A run that ended before writing it still has a history.
		fmt.Fprintln(stderr, "report: no report.json: the page shows the history alone")
	case err != nil:
		fmt.Fprintln(stderr, "report:", err)
		return 2
	default:
		if err := json.Unmarshal(b, &rep); err != nil {
			fmt.Fprintf(stderr, "report: %s: %v\n", filepath.Join(dir, "report.json"), err)
			return 2
		}
	}
	if rep.Nodes == 0 {
		rep.Nodes = f.Nodes
	}
	if err := writeReportPage(dir, rep, h, v); err != nil {
		fmt.Fprintln(stderr, "report:", err)
		return 2
	}
	fmt.Fprintln(stdout, filepath.Join(dir, reportPage))
	return 0
}

// verdictRow is one line of the verdict table: a check, how many cases it
// found, and up to a few of them.
type verdictRow struct {
	Check, Means string
	Count        int
	Pass         bool
	Examples     []string
}

// countRow is one figure the run counts but does not judge.
type countRow struct{ Name, Value string }

// pageData is what the page template shows.
type pageData struct {
	Status, StatusClass string
	Began, Span         string
	Seed                string
	Nodes               int
	Timeline            template.HTML
	Verdicts            []verdictRow
	Counts              []countRow
	FaultCounts         []countRow
	Kinds               []countRow // each kind of fault applied, to its colour
	FaultLog            []faultRow
	OpLog               []opRow
	Flags               []countRow
	Events              []string
	VerdictText         string
}

// faultRow and opRow are the fault and operation logs' table lines, their
// times from the run's start.
type faultRow struct{ At, Held, Kind, Nodes, Shape, Error string }
type opRow struct{ At, Command, Outcome string }

// examplesShown is how many cases a verdict row lists.
const examplesShown = 3

// renderReport writes the page.
func renderReport(w io.Writer, rep report, h *history, v verdict) error {
	from, to := runSpan(h, rep.Began, rep.FaultLog, rep.OpLog)
	tl := buildTimeline(h, from, to)
	nodes := runNodes(rep, h)
	d := pageData{
		Seed:        strconv.FormatUint(rep.Seed, 10),
		Nodes:       len(nodes),
		Verdicts:    verdictRows(v, h),
		Counts:      countRows(v),
		Events:      rep.Events,
		VerdictText: v.String(),
		Timeline: template.HTML(timelineSVG(tl, leaderBands(h.leaderSamples(), from, tl.seconds), nodes,
			rep.FaultLog, rep.OpLog, rep.Stopped)),
	}
	switch {
	case v.defective():
		d.Status, d.StatusClass = "FAIL: the history shows a defect", "fail"
	case !v.ok():
		d.Status, d.StatusClass = "INCOMPLETE: the run could not observe everything", "incomplete"
	default:
		d.Status, d.StatusClass = "PASS: the history is correct", "pass"
	}
	if !from.IsZero() {
		d.Began = from.UTC().Format("2006-01-02 15:04:05 UTC")
		d.Span = clock(to.Sub(from))
	}
	for _, k := range sortedKeys(rep.FaultCounts) {
		d.FaultCounts = append(d.FaultCounts, countRow{k, strconv.Itoa(rep.FaultCounts[k])})
	}
	kinds := map[string]string{}
	for _, r := range rep.FaultLog {
		kinds[r.Kind] = faultColour(r.Kind)
	}
	for _, k := range sortedKeys(kinds) {
		d.Kinds = append(d.Kinds, countRow{k, kinds[k]})
	}
	for _, k := range sortedKeys(rep.Flags) {
		v := rep.Flags[k]
		if v == "" {
			v = "(none)"
		}
		d.Flags = append(d.Flags, countRow{"--" + k, v})
	}
	for _, r := range rep.FaultLog {
		row := faultRow{At: clock(r.Start.Sub(from)), Held: fmt.Sprintf("%.1f s", r.End.Sub(r.Start).Seconds()),
			Kind: r.Kind, Nodes: strings.Join(r.Nodes, " "), Shape: r.Shape, Error: r.Error}
		if r.HealError != "" {
			row.Error = strings.TrimPrefix(row.Error+"; healing: "+r.HealError, "; ")
		}
		d.FaultLog = append(d.FaultLog, row)
	}
	for _, o := range rep.OpLog {
		row := opRow{At: clock(o.Start.Sub(from)), Command: "warrenctl " + o.Command, Outcome: "ok"}
		if o.Error != "" {
			row.Outcome = o.Error
		}
		d.OpLog = append(d.OpLog, row)
	}
	return pageTemplate.Execute(w, d)
}

// runNodes are the cluster's node names: warren-0 to warren-(n-1), as
// the harness names them, and any other the history mentions.
func runNodes(rep report, h *history) []string {
	var nodes []string
	for i := range rep.Nodes {
		nodes = append(nodes, fmt.Sprintf("warren-%d", i))
	}
	add := func(n string) {
		if n != "" && !slices.Contains(nodes, n) {
			nodes = append(nodes, n)
		}
	}
	for _, r := range rep.FaultLog {
		for _, n := range r.Nodes {
			add(n)
		}
	}
	for _, s := range h.leaderSamples() {
		add(s.Via)
		for _, l := range s.Leaders {
			add(l)
		}
	}
	slices.Sort(nodes)
	return nodes
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// verdictRows are the checks, each with what it found; a check that only
// applies to some runs (RPC, rolling upgrade) has rows only when it ran.
func verdictRows(v verdict, h *history) []verdictRow {
	ids := func(check, means string, found []uint64) verdictRow {
		return verdictRow{Check: check, Means: means, Count: len(found), Pass: len(found) == 0, Examples: storiesOf(h, found)}
	}
	lines := func(check, means string, found []string) verdictRow {
		return verdictRow{Check: check, Means: means, Count: len(found), Pass: len(found) == 0, Examples: firstOf(found)}
	}
	count := func(check, means string, n int) verdictRow {
		return verdictRow{Check: check, Means: means, Count: n, Pass: n == 0}
	}
	rows := []verdictRow{
		ids("lost", "confirmed or delivered, never delivered with an ack sent", v.Lost),
		ids("unexpected", "delivered, never published", v.Unexpected),
		ids("duplicated", "delivered again after an ack the broker read", v.Duplicated),
		ids("unflagged redeliveries", "delivered again without the redelivered flag", v.Unflagged),
		ids("misrouted", "delivered from another queue than published to", v.Misrouted),
		ids("corrupted", "delivered with a body or headers other than published", v.Corrupted),
		ids("reordered", "first delivered out of publish order where the queue promises order", v.Reordered),
		count("stranded", "unacknowledged, no consumer, 10 s after the end", v.Stranded),
		count("refused after healing", "publishes nacked or unconfirmed once healed and drained", v.RefusedAfterHeal),
		lines("nodes exited unasked", "a node's process ended without the nemesis asking", v.Crashed),
		lines("could not observe", "what the run could not look at, so cannot vouch for", v.Unobserved),
	}
	if r := v.RPC; r != nil {
		rows = append(rows,
			rpcRow("rpc misrouted replies", "a reply in another client's reply queue", r.Misrouted, r),
			lines("rpc stray replies", "a reply with an ID no client sent", r.Strays),
			rpcRow("rpc returned while queue lived", "a reply returned unroutable while its reply queue lived", r.ReturnedLive, r),
			rpcRow("rpc unanswered", "a confirmed request of a client kept to the end, never answered", r.Unanswered, r),
		)
	}
	if u := v.Upgrade; u != nil {
		rows = append(rows,
			verdictRow{Check: "rolling upgrade", Means: "every node moved to the new build",
				Count: u.nodes - u.Upgraded, Pass: u.Upgraded == u.nodes,
				Examples: []string{fmt.Sprintf("%d of %d nodes upgraded", u.Upgraded, u.nodes)}},
			lines("members behind the machine version", fmt.Sprintf("queue members not on machine version %d", u.Machine), u.Behind),
		)
	}
	return rows
}

// rpcRow is an RPC check whose cases are request IDs; its examples are
// the RPC verdict's stories that name them.
func rpcRow(check, means string, found []uint64, r *rpcVerdict) verdictRow {
	row := verdictRow{Check: check, Means: means, Count: len(found), Pass: len(found) == 0}
	for _, id := range found {
		if len(row.Examples) == examplesShown {
			break
		}
		ex := "request " + strconv.FormatUint(id, 10)
		for _, s := range r.Stories {
			if strings.HasPrefix(s, ex+" ") {
				ex = s
				break
			}
		}
		row.Examples = append(row.Examples, ex)
	}
	return row
}

// storiesOf tells the first few messages' stories.
func storiesOf(h *history, ids []uint64) []string {
	ids = slices.Sorted(slices.Values(ids))
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, id := range ids {
		if len(out) == examplesShown {
			break
		}
		if h.msgs[id] != nil {
			out = append(out, h.story(id))
		}
	}
	return out
}

func firstOf(s []string) []string { return s[:min(len(s), examplesShown)] }

// countRows are the figures counted, not judged.
func countRows(v verdict) []countRow {
	n := strconv.Itoa
	w := v.ConfirmWait
	rows := []countRow{
		{"published", n(v.Attempted)},
		{"confirmed", n(v.Confirmed)},
		{"indeterminate (neither confirmed nor refused)", fmt.Sprintf("%d, %d of them delivered", v.Indeterminate, v.IndeterminateDelivered)},
		{"delivered", fmt.Sprintf("%d distinct messages in %d deliveries", v.Delivered, v.Deliveries)},
		{"redelivered, flagged", n(v.Redelivered)},
		{"dead-lettered", fmt.Sprintf("%d, %d more copies (at-least-once)", v.DeadLettered, v.DeadLetterCopies)},
		{"confirm wait", fmt.Sprintf("p50 %.3f s, p99 %.3f s, max %.3f s, %d over 10 s", w.P50, w.P99, w.Max, w.Over10s)},
	}
	if w.Slowest != "" {
		rows = append(rows, countRow{"slowest confirm", w.Slowest})
	}
	if r := v.RPC; r != nil {
		rows = append(rows, countRow{"rpc", fmt.Sprintf("%d requests (%d confirmed) from %d connections (%d kept to the end), %d answered, %d answered twice",
			r.Requests, r.Confirmed, r.Clients, r.Clean, r.Answered, r.Repeated)})
	}
	return rows
}
