// Package linger decides when an item bound for a costly send (a publish
// for the Raft log, deliveries for another node) is held for a moment so
// that those following it share the send. A send costs about the same
// whatever it carries (a log write and a sync on each member, a gRPC
// message and a wake-up on each side), and at 1,000 msg/s items arrive a
// millisecond apart, each alone in its send unless held.
//
// Who gains nothing is not held:
//   - an item that arrives longer than the wait after the one before it
//     goes at once: at that rate company would not come in time;
//   - a sender that waits for each answer before the next item (a
//     publisher waiting for each confirm, a consumer with prefetch 1), or
//     for a small window of them, brings no company: a hold that runs out
//     with nothing arrived after its first quarter gained nothing, and
//     Misses such holds in a row stop the holding for Rest;
//   - Batch held items go at once (or fewer, SetBatch): at high rates the
//     sends batch by themselves, and a hold would only add latency.
package linger

import "time"

const (
	// Batch held items go at once.
	Batch = 16
	// Misses holds in a row that gained nothing stop the holding for Rest.
	Misses = 3
	Rest   = time.Second
)

// Policy is one stream's state. It is not safe for concurrent use: its
// owner guards it with the lock that orders the items.
type Policy struct {
	wait   time.Duration // 0 holds nothing
	batch  int           // held items go at once when this many are held
	held   int
	first  time.Time // the first held item's arrival
	due    time.Time // when the held items go: first + wait
	last   time.Time // the previous item's arrival
	misses int       // holds in a row that gained nothing
	rest   time.Time // nothing held before then
}

// New returns a policy that holds items for up to wait; 0 holds none.
func New(wait time.Duration) Policy { return Policy{wait: wait, batch: Batch} }

// Wait is the longest an item is held.
func (p *Policy) Wait() time.Duration { return p.wait }

// SetWait changes the longest an item is held, for the items that arrive
// while none is held; 0 holds none.
func (p *Policy) SetWait(wait time.Duration) {
	if p.held == 0 {
		p.wait = wait
	}
}

// SetBatch changes how many held items go at once (at least 2), for the
// items that arrive while none is held. Two holds an item at most until
// the next one arrives: items that come in bursts (a producer paced by a
// coarse timer sends two or three back to back) share a send, while one
// arriving alone waits about one gap, not the whole wait.
func (p *Policy) SetBatch(n int) {
	if p.held == 0 {
		p.batch = max(n, 2)
	}
}

// Arrive records an item arriving at now and says whether it is held:
// it joins items already held, or it came within the wait of the one
// before while the policy is not resting.
func (p *Policy) Arrive(now time.Time) bool {
	hold := p.wait > 0 && (p.held > 0 || now.Sub(p.last) < p.wait && now.After(p.rest))
	p.last = now
	if hold {
		if p.held == 0 {
			p.first, p.due = now, now.Add(p.wait)
		}
		p.held++
	}
	return hold
}

// Held is the number of items held.
func (p *Policy) Held() int { return p.held }

// Full says the held items should go now (Batch of them, or SetBatch's).
func (p *Policy) Full() bool { return p.held >= p.batch }

// Due is when the held items go.
func (p *Policy) Due() time.Time { return p.due }

// Release records that the held items went at now; expired says their
// wait ran out rather than a batch filling or an operation needing them.
func (p *Policy) Release(expired bool, now time.Time) {
	if p.held == 0 {
		return
	}
	p.held = 0
	if !expired {
		return
	}
	if p.last.Sub(p.first) >= p.wait/4 {
		p.misses = 0
	} else if p.misses++; p.misses >= Misses {
		p.misses = 0
		p.rest = now.Add(Rest)
	}
}
