package main

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// timeline is a run's history cut into seconds, for the report's charts:
// second i covers [start+i s, start+i+1 s).
type timeline struct {
	start time.Time
	// seconds is the number of buckets.
	seconds int
	// published, confirmed and delivered count the publishes made, the
	// confirms received and the deliveries made in each second.
	published, confirmed, delivered []int
	// p50 and p99 are the confirm waits, in seconds, of the publishes
	// made in each second that were confirmed; NaN when there were none.
	p50, p99 []float64
}

// runSpan is the stretch of time the report covers: from the clients'
// start (began, or the first thing the history holds when it is zero)
// to the last thing the history or the fault log holds.
func runSpan(h *history, began time.Time, faults []faultRecord, ops []opRecord) (from, to time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	see := func(t time.Time) {
		if t.IsZero() {
			return
		}
		if from.IsZero() || t.Before(from) {
			from = t
		}
		if t.After(to) {
			to = t
		}
	}
	see(began)
	for _, r := range h.msgs {
		see(r.published)
		see(r.confirmed)
		for _, d := range r.deliveries {
			see(d.at)
		}
	}
	for _, s := range h.leaders {
		see(s.At)
	}
	for _, f := range faults {
		see(f.Start)
		see(f.End)
	}
	for _, o := range ops {
		see(o.Start)
	}
	if !began.IsZero() {
		from = began
	}
	return from, to
}

// buildTimeline counts h's events in each second from from to to.
func buildTimeline(h *history, from, to time.Time) timeline {
	n := int(math.Ceil(to.Sub(from).Seconds()))
	tl := timeline{start: from, seconds: max(n, 1)}
	tl.published = make([]int, tl.seconds)
	tl.confirmed = make([]int, tl.seconds)
	tl.delivered = make([]int, tl.seconds)
	waits := make([][]float64, tl.seconds)
	bucket := func(t time.Time) int {
		i := int(t.Sub(from) / time.Second)
		if t.IsZero() || i < 0 || i >= tl.seconds {
			return -1
		}
		return i
	}
	h.mu.Lock()
	for _, r := range h.msgs {
		p := bucket(r.published)
		if p >= 0 {
			tl.published[p]++
		}
		if c := bucket(r.confirmed); c >= 0 {
			tl.confirmed[c]++
			if p >= 0 {
				waits[p] = append(waits[p], r.confirmed.Round(0).Sub(r.published.Round(0)).Seconds())
			}
		}
		for _, d := range r.deliveries {
			if i := bucket(d.at); i >= 0 {
				tl.delivered[i]++
			}
		}
	}
	h.mu.Unlock()
	tl.p50 = make([]float64, tl.seconds)
	tl.p99 = make([]float64, tl.seconds)
	for i, w := range waits {
		tl.p50[i], tl.p99[i] = math.NaN(), math.NaN()
		if len(w) == 0 {
			continue
		}
		slices.Sort(w)
		tl.p50[i] = w[int(0.5*float64(len(w)-1))]
		tl.p99[i] = w[int(0.99*float64(len(w)-1))]
	}
	return tl
}

// leaderSpan is a stretch of time during which the nodes asked agreed
// that one node led a queue.
type leaderSpan struct {
	from, to time.Time
	leader   string
	// disputed: in these seconds some node asked named another leader
	// (or none), as a node cut off from the rest may, or one that has not
	// heard of a change yet.
	disputed bool
}

// leaderBand is one queue's leadership over the run.
type leaderBand struct {
	queue string
	spans []leaderSpan
}

// leaderViewLasts is how long a node's answer stands for it when it gives
// no newer one: a node slow to answer (its listing waits on a dead
// leader's count) still counts, one down soon stops counting.
const leaderViewLasts = leaderAnswerWithin

// leaderBands turns the samples into each queue's leadership, second by
// second. In each second every node counts with its latest answer, given
// in that second or at most leaderViewLasts before its end; the leader is
// the one most of those answers name (a known leader over "none" on a
// tie, then the first name). A second in which no node's answer stands,
// or most name no leader, is a gap. Queues are sorted by name.
func leaderBands(samples []leaderSample, from time.Time, seconds int) []leaderBand {
	samples = slices.Clone(samples)
	slices.SortStableFunc(samples, func(a, b leaderSample) int { return a.At.Compare(b.At) })
	latest := map[string]leaderSample{}       // node asked to its latest answer
	views := map[string][]map[string]string{} // queue, second: node asked to the leader it named
	next := 0
	for i := range seconds {
		end := from.Add(time.Duration(i+1) * time.Second)
		for ; next < len(samples) && samples[next].At.Before(end); next++ {
			latest[samples[next].Via] = samples[next]
		}
		for via, s := range latest {
			if end.Sub(s.At) > leaderViewLasts {
				delete(latest, via)
				continue
			}
			for q, leader := range s.Leaders {
				secs := views[q]
				if secs == nil {
					secs = make([]map[string]string, seconds)
					views[q] = secs
				}
				if secs[i] == nil {
					secs[i] = map[string]string{}
				}
				secs[i][via] = leader
			}
		}
	}
	var bands []leaderBand
	for q, secs := range views {
		b := leaderBand{queue: q}
		for i, v := range secs {
			leader, disputed := winner(v)
			at := from.Add(time.Duration(i) * time.Second)
			if leader == "" {
				continue
			}
			if last := len(b.spans) - 1; last >= 0 && b.spans[last].leader == leader && b.spans[last].disputed == disputed && b.spans[last].to.Equal(at) {
				b.spans[last].to = at.Add(time.Second)
				continue
			}
			b.spans = append(b.spans, leaderSpan{from: at, to: at.Add(time.Second), leader: leader, disputed: disputed})
		}
		bands = append(bands, b)
	}
	slices.SortFunc(bands, func(a, b leaderBand) int { return cmp.Compare(a.queue, b.queue) })
	return bands
}

// winner is the leader most of the nodes' views name, and whether any
// view named another.
func winner(views map[string]string) (leader string, disputed bool) {
	votes := map[string]int{}
	for _, l := range views {
		votes[l]++
	}
	best := -1
	for name, n := range votes {
		if n > best || n == best && (leader == "" || name != "" && name < leader) {
			leader, best = name, n
		}
	}
	return leader, len(votes) > 1
}
