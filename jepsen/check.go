package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// historyFile is the run directory's history as JSON lines, which
// `jepsen check RUN_DIR` judges again offline.
const historyFile = "history.jsonl"

// event is one line of history.jsonl. Kind says which fields it uses:
//
//   - "run": DeadLetterTo (each queue that dead-letters, to its
//     dead-letter queue), Expect (the workloads that ran) and Facts,
//     what the run observed beside the messages (first line);
//   - "publish": ID, Queue, Via (the node published through), At,
//     Channel (the publishing channel, for the order check) and Bytes
//     (a multi-frame body's length);
//   - "confirm": ID, At;
//   - "deliver": ID, Queue (delivered from), Via, At, Redelivered, Ack
//     ("", "failed", "unconfirmed", "ok" or "abandoned": ackOutcome),
//     Seq (the order the clients took deliveries in), Proved (for an ok
//     ack, the Seq reached when a round trip showed the broker had read
//     it) and Corrupt (how the content differed from what was
//     published);
//   - "unobserved": What the run could not observe;
//   - "leaders": At, Via (the node asked), Leaders (each quorum queue to
//     the node that node said leads it, "" for none known).
type event struct {
	Kind         string            `json:"kind"`
	ID           uint64            `json:"id,omitempty"`
	Queue        string            `json:"queue,omitempty"`
	Via          string            `json:"via,omitempty"`
	At           time.Time         `json:"at,omitzero"`
	Redelivered  bool              `json:"redelivered,omitempty"`
	Ack          ackOutcome        `json:"ack,omitempty"`
	Channel      string            `json:"channel,omitempty"`
	Bytes        int               `json:"bytes,omitempty"`
	Seq          uint64            `json:"seq,omitempty"`
	Proved       uint64            `json:"proved,omitempty"`
	Corrupt      string            `json:"corrupt,omitempty"`
	What         string            `json:"what,omitempty"`
	DeadLetterTo map[string]string `json:"dead_letter_to,omitempty"`
	Expect       *expectations     `json:"expect,omitempty"`
	Facts        *facts            `json:"facts,omitempty"`
	Leaders      map[string]string `json:"leaders,omitempty"`
}

// facts are the parts of a verdict that do not come from the messages'
// history: the cluster's listing, the checks after healing, the nodes'
// exits, and the RPC and upgrade workloads' verdicts.
type facts struct {
	Stranded         int             `json:"stranded"`
	RefusedAfterHeal int             `json:"refused_after_heal"`
	Crashed          []string        `json:"crashed,omitempty"`
	RPC              *rpcVerdict     `json:"rpc,omitempty"`
	Upgrade          *upgradeVerdict `json:"upgrade,omitempty"`
	// Nodes is the cluster's size (the upgrade's verdict needs it).
	Nodes int `json:"nodes"`
	// StrandedByQueue is Stranded by queue.
	StrandedByQueue map[string]int `json:"stranded_by_queue,omitempty"`
	// ListingError says why warrenctl's list of queues could not be
	// read (the stranded messages are then unknown), DrainError why the
	// queues were not drained.
	ListingError string `json:"listing_error,omitempty"`
	DrainError   string `json:"drain_error,omitempty"`
	// Faults are the faults the nemesis tried, each with the error that
	// kept it from being applied; MinFaults is the fewest applied the
	// run accepts (--min-faults).
	Faults    []faultOutcome `json:"faults,omitempty"`
	MinFaults int            `json:"min_faults,omitempty"`
}

// faultOutcome is one fault the nemesis tried: what, on which nodes, and
// the error that kept it from being applied ("" when applied).
type faultOutcome struct {
	What  string `json:"what"`
	Error string `json:"error,omitempty"`
}

// apply adds the facts to a verdict drawn from the messages' history:
// what the run could not observe fails it (a drain that timed out, a
// listing it could not read, a fault asked for and not applied, fewer
// faults than --min-faults).
func (f facts) apply(v *verdict) {
	v.Stranded, v.RefusedAfterHeal, v.Crashed, v.RPC = f.Stranded, f.RefusedAfterHeal, f.Crashed, f.RPC
	if f.StrandedByQueue != nil {
		v.Stranded = 0
		for q, n := range f.StrandedByQueue {
			v.Stranded += n
			if n > 0 {
				v.queue(q).Stranded = n
			}
		}
	}
	if f.Upgrade != nil {
		u := *f.Upgrade
		u.nodes = f.Nodes
		v.Upgrade = &u
	}
	if f.DrainError != "" {
		// Messages still in a queue would read as lost.
		v.Unobserved = append(v.Unobserved, "every message: "+f.DrainError)
	}
	if f.ListingError != "" {
		v.Unobserved = append(v.Unobserved, "the stranded messages: "+f.ListingError)
	}
	v.Exercised.FaultsApplied, v.Exercised.MinFaults = 0, f.MinFaults
	for _, fo := range f.Faults {
		if fo.Error != "" {
			v.Unobserved = append(v.Unobserved, fmt.Sprintf("the fault %s, asked for and not applied: %s", fo.What, fo.Error))
			continue
		}
		v.Exercised.FaultsApplied++
	}
	if v.Exercised.FaultsApplied < f.MinFaults {
		v.Unobserved = append(v.Unobserved, fmt.Sprintf("enough faults: %d applied, at least %d wanted (--min-faults)", v.Exercised.FaultsApplied, f.MinFaults))
	}
}

// writeHistory writes h and f as JSON lines: the run line, then every
// message's events in ID order, then what the run could not observe, then
// the leadership samples.
func writeHistory(w io.Writer, h *history, f facts) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(event{Kind: "run", DeadLetterTo: h.deadLetterTo, Expect: &h.expect, Facts: &f}); err != nil {
		return err
	}
	ids := make([]uint64, 0, len(h.msgs))
	for id := range h.msgs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		r := h.msgs[id]
		var evs []event
		if !r.published.IsZero() {
			evs = append(evs, event{Kind: "publish", ID: id, Queue: r.queue, Via: r.via, At: r.published, Channel: r.channel, Bytes: r.bytes})
		}
		if !r.confirmed.IsZero() {
			evs = append(evs, event{Kind: "confirm", ID: id, At: r.confirmed})
		}
		for _, d := range r.deliveries {
			evs = append(evs, event{Kind: "deliver", ID: id, Queue: d.queue, Via: d.via, At: d.at, Redelivered: d.redelivered, Ack: d.ack, Seq: d.seq, Corrupt: d.corrupt, Proved: d.proved})
		}
		for _, e := range evs {
			if err := enc.Encode(e); err != nil {
				return err
			}
		}
	}
	for _, u := range h.unobserved {
		if err := enc.Encode(event{Kind: "unobserved", What: u}); err != nil {
			return err
		}
	}
	for _, l := range h.leaders {
		if err := enc.Encode(event{Kind: "leaders", At: l.At, Via: l.Via, Leaders: l.Leaders}); err != nil {
			return err
		}
	}
	return bw.Flush()
}

func writeHistoryFile(path string, h *history, f facts) error {
	file, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := writeHistory(file, h, f); err != nil {
		file.Close()
		return err
	}
	return file.Close()
}

// readHistory reads what writeHistory wrote.
func readHistory(r io.Reader) (*history, facts, error) {
	h := newHistory(nil)
	var f facts
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for n := 1; sc.Scan(); n++ {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, f, fmt.Errorf("line %d: %w", n, err)
		}
		rec := func() *record {
			r := h.msgs[e.ID]
			if r == nil {
				r = &record{}
				h.msgs[e.ID] = r
			}
			return r
		}
		switch e.Kind {
		case "run":
			for q, dlq := range e.DeadLetterTo {
				h.deadLetterTo[q] = dlq
			}
			if e.Facts != nil {
				f = *e.Facts
			}
			if e.Expect != nil {
				h.expect = *e.Expect
			}
		case "publish":
			r := rec()
			r.queue, r.via, r.published, r.channel, r.bytes = e.Queue, e.Via, e.At, e.Channel, e.Bytes
			h.next = max(h.next, e.ID)
		case "confirm":
			rec().confirmed = e.At
		case "deliver":
			r := rec()
			r.deliveries = append(r.deliveries, delivery{queue: e.Queue, at: e.At, via: e.Via, redelivered: e.Redelivered, ack: e.Ack, seq: e.Seq, corrupt: e.Corrupt, proved: e.Proved})
			h.seq = max(h.seq, e.Seq)
		case "unobserved":
			h.unobserved = append(h.unobserved, e.What)
		case "leaders":
			h.leaders = append(h.leaders, leaderSample{At: e.At, Via: e.Via, Leaders: e.Leaders})
		default:
			return nil, f, fmt.Errorf("line %d: unknown kind %q", n, e.Kind)
		}
	}
	return h, f, sc.Err()
}

// checkRun judges the history a run wrote in dir again.
func checkRun(dir string) (verdict, error) {
	file, err := os.Open(filepath.Join(dir, historyFile))
	if err != nil {
		return verdict{}, err
	}
	defer file.Close()
	h, f, err := readHistory(file)
	if err != nil {
		return verdict{}, fmt.Errorf("%s: %w", file.Name(), err)
	}
	v := h.check()
	f.apply(&v)
	return v, nil
}

// checkExit is `jepsen check RUN_DIR`: the verdict on a run's history,
// printed as the run printed it, with the run's exit status.
func checkExit(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, "Usage: jepsen check RUN_DIR\n\nJudges the history.jsonl a run wrote in RUN_DIR (its --dir) again and prints the verdict.")
		return 2
	}
	v, err := checkRun(args[0])
	if err != nil {
		fmt.Fprintln(stderr, "check:", err)
		return 2
	}
	fmt.Fprintln(stdout, v)
	return exitStatus(v)
}
