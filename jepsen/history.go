package main

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// history is what the clients saw: every message published (each with its
// own ID, never republished), which of them the broker confirmed, and
// every delivery, with the queue it came from, its redelivered flag and
// what became of its ack. The checker judges the broker from it alone.
type history struct {
	mu   sync.Mutex
	next uint64
	msgs map[uint64]*record
	// deadLetterTo maps each queue whose messages are dead-lettered
	// at-least-once (workload.expiring) to its dead-letter queue
	// (workload.dead): its messages must come from there.
	deadLetterTo map[string]string
	// unobserved says what the run could not observe (a listing that
	// failed, a drain that did not finish): a run that could not look
	// cannot be judged clean.
	unobserved []string
	// leaders are the nodes' answers to who leads each queue, sampled
	// every second (leaders.go), for the report; not judged.
	leaders []leaderSample
	// expect says which workloads ran, so that the checker can tell a
	// workload that saw nothing (expect.go), and which queues promise
	// order (order.go).
	expect expectations
	// seq numbers the deliveries in the order the clients took them.
	seq uint64
}

// record is one message's story.
type record struct {
	queue, via string // the queue, the node it was published through
	// channel names the publishing channel (node and connection), for
	// the order check: order is promised per channel. "" when unknown.
	channel string
	// bytes is the body's length when it spans several frames
	// (large.go); 0 otherwise.
	bytes      int
	published  time.Time
	confirmed  time.Time // zero unless acked
	deliveries []delivery
}

// delivery is one delivery of a message: from which queue, when, through
// which node, whether flagged redelivered, and its ack's outcome.
type delivery struct {
	queue       string
	at          time.Time
	via         string
	redelivered bool
	ack         ackOutcome
	// seq is the delivery's place in the order the clients took
	// deliveries, across every consumer.
	seq uint64
	// corrupt says how the body or headers differed from what was
	// published (large.go); "" when intact or not checked.
	corrupt string
	// proved is, for an ack that is ok, the number of deliveries taken
	// when the round trip that showed the broker had read it completed:
	// only deliveries taken after that (seq > proved) came after the
	// broker knew of the ack. 0 with a legacy history: at once.
	proved uint64
}

// ackOutcome is what the client knows of a delivery's ack. AMQP acks are
// not answered, so an ack the client wrote is known to have reached the
// broker only once a later round trip on its channel completed (the
// broker reads a connection's frames in order): a clean close of the
// connection, or the next basic.get's answer.
type ackOutcome string

const (
	// ackNone: no ack was attempted.
	ackNone ackOutcome = ""
	// ackFailed: the client could not send the ack (its channel or
	// connection had gone): the broker must deliver the message again.
	ackFailed ackOutcome = "failed"
	// ackUnconfirmed: the ack was sent, but the connection was lost
	// before a later round trip showed the broker had read it. The
	// message may come again, flagged redelivered, or not.
	ackUnconfirmed ackOutcome = "unconfirmed"
	// ackOK: the ack was sent and the broker read it: the message must
	// never be delivered again.
	ackOK ackOutcome = "ok"
	// ackAbandoned: no ack was sent, and the consumer dropped its TCP
	// connection while holding the message (crash.go): the broker must
	// deliver it again, flagged redelivered.
	ackAbandoned ackOutcome = "abandoned"
)

// sent reports whether the ack left the client: the broker may have
// taken it.
func (a ackOutcome) sent() bool { return a == ackUnconfirmed || a == ackOK }

// deliveryRef names one delivery in a history, for settling its ack.
type deliveryRef struct {
	id uint64
	n  int
}

// newHistory makes an empty history; deadLetterTo maps each queue that
// dead-letters to its dead-letter queue.
func newHistory(deadLetterTo map[string]string) *history {
	h := &history{msgs: make(map[uint64]*record), deadLetterTo: map[string]string{}}
	for q, dlq := range deadLetterTo {
		h.deadLetterTo[q] = dlq
	}
	return h
}

// unobservable records that the run could not observe something, which
// fails the run.
func (h *history) unobservable(format string, args ...any) {
	h.mu.Lock()
	h.unobserved = append(h.unobserved, fmt.Sprintf(format, args...))
	h.mu.Unlock()
}

// awaitingDeadLetters counts the messages confirmed to a dead-lettering
// queue and not delivered yet: once the producers have stopped, the drain
// waits for them.
func (h *history) awaitingDeadLetters() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.msgs {
		if h.deadLetterTo[r.queue] != "" && !r.confirmed.IsZero() && len(r.deliveries) == 0 {
			n++
		}
	}
	return n
}

// publish hands out the next message ID, recorded as attempted to queue
// through node via.
func (h *history) publish(queue, via string) uint64 {
	return h.publishOn(queue, via, "")
}

// publishOn is publish on a named channel, for the order check.
func (h *history) publishOn(queue, via, channel string) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next++
	h.msgs[h.next] = &record{queue: queue, via: via, channel: channel, published: time.Now()}
	return h.next
}

// sized records the length of message id's body, which spans several
// frames.
func (h *history) sized(id uint64, bytes int) {
	h.mu.Lock()
	if r := h.msgs[id]; r != nil {
		r.bytes = bytes
	}
	h.mu.Unlock()
}

func (h *history) confirm(id uint64) {
	h.mu.Lock()
	if r := h.msgs[id]; r != nil {
		r.confirmed = time.Now()
	}
	h.mu.Unlock()
}

// deliver records a delivery from queue through node via, not acked yet;
// an ID no producer handed out gets a record of its own, without a
// publish. The reference settles the ack (acked).
func (h *history) deliver(id uint64, queue, via string, redelivered bool) deliveryRef {
	return h.deliverChecked(id, queue, via, redelivered, "")
}

// deliverChecked is deliver for a delivery whose content was checked:
// corrupt says how it differed from what was published, "" for intact.
func (h *history) deliverChecked(id uint64, queue, via string, redelivered bool, corrupt string) deliveryRef {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.msgs[id]
	if r == nil {
		r = &record{}
		h.msgs[id] = r
	}
	h.seq++
	r.deliveries = append(r.deliveries, delivery{queue: queue, at: time.Now(), via: via, redelivered: redelivered, seq: h.seq, corrupt: corrupt})
	return deliveryRef{id, len(r.deliveries) - 1}
}

// acked records the outcome of the ack of the deliveries refs.
func (h *history) acked(outcome ackOutcome, refs ...deliveryRef) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ref := range refs {
		if r := h.msgs[ref.id]; r != nil && ref.n < len(r.deliveries) {
			r.deliveries[ref.n].ack = outcome
			if outcome == ackOK {
				r.deliveries[ref.n].proved = h.seq
			}
		}
	}
}

// acks follows one channel's acks: each ack sent is unconfirmed until a
// later round trip on the channel shows the broker read it (roundTrip).
type acks struct {
	h       *history
	pending []deliveryRef
}

// ack acks d, recorded as ref, and records the outcome.
func (a *acks) ack(d interface{ Ack(bool) error }, ref deliveryRef) error {
	if err := d.Ack(false); err != nil {
		a.h.acked(ackFailed, ref)
		return err
	}
	a.h.acked(ackUnconfirmed, ref)
	a.pending = append(a.pending, ref)
	return nil
}

// roundTrip records that a round trip on the channel completed after the
// acks sent so far: the broker read them.
func (a *acks) roundTrip() {
	a.h.acked(ackOK, a.pending...)
	a.pending = a.pending[:0]
}

// deliveredCount is the number of deliveries so far, for telling when the
// queues have stopped handing out messages.
func (h *history) deliveredCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.msgs {
		n += len(r.deliveries)
	}
	return n
}

// verdict is the checker's judgement of a history.
type verdict struct {
	Attempted int `json:"attempted"`
	Confirmed int `json:"confirmed"`
	// Delivered counts distinct messages delivered; Deliveries every
	// delivery.
	Delivered  int `json:"delivered"`
	Deliveries int `json:"deliveries"`
	// Indeterminate publishes were neither confirmed nor refused for
	// certain (nacked, or their channel closed first); delivering them
	// or not are both correct. IndeterminateDelivered says how many were.
	Indeterminate          int `json:"indeterminate"`
	IndeterminateDelivered int `json:"indeterminate_delivered"`
	// Redelivered messages came more than once, every later time flagged
	// redelivered: at-least-once delivery after a consumer or its node
	// went away before acking.
	Redelivered int `json:"redelivered"`
	// Stranded messages were still unacknowledged, in queues without
	// consumers, 10 s after every consumer had gone: nobody would get them.
	Stranded int `json:"stranded"`
	// RefusedAfterHeal publishes were nacked or not confirmed in time
	// once the cluster was healed and drained (workload.afterwards): a
	// healed cluster takes every publish.
	RefusedAfterHeal int `json:"refused_after_heal"`
	// DeadLettered messages were published to a queue that dead-letters
	// and delivered from its dead-letter queue; DeadLetterCopies are the
	// deliveries of them beyond the first, unflagged: at-least-once
	// dead-lettering publishes a message again when it is not sure the
	// dead-letter queue took it (RabbitMQ's does the same), and each copy
	// is a new message there. Counted, not judged.
	DeadLettered     int `json:"dead_lettered"`
	DeadLetterCopies int `json:"dead_letter_copies"`
	// ConfirmWait is how long confirmed publishes waited for their
	// confirm: the availability the faults left. Reported, not judged (a
	// queue whose majority is down waits as long as the fault lasts); a
	// slowest wait far beyond the faults' length is worth a look.
	ConfirmWait waits `json:"confirm_wait"`
	// Lost were confirmed (or delivered, so the queue had them) and
	// never delivered with an ack sent; Unexpected were delivered and
	// never published; Duplicated were delivered again after an ack the
	// broker had read; Unflagged came again, before any such ack, without
	// the redelivered flag; Misrouted were delivered from a queue other
	// than the one they were published to (or, dead-lettered, its
	// dead-letter queue). Each is a defect.
	Lost       []uint64 `json:"lost"`
	Unexpected []uint64 `json:"unexpected"`
	Duplicated []uint64 `json:"duplicated"`
	Unflagged  []uint64 `json:"unflagged"`
	Misrouted  []uint64 `json:"misrouted"`
	// Corrupted were delivered with a body or headers other than those
	// published (large.go); Reordered were first delivered, unflagged,
	// after a message published later on the same channel, on a queue
	// that promises order (order.go). Each is a defect.
	Corrupted []uint64 `json:"corrupted"`
	Reordered []uint64 `json:"reordered"`
	// ByQueue counts each defect by the queue it concerns (queues.go).
	ByQueue map[string]*queueDefects `json:"by_queue,omitempty"`
	// Exercised shows that the workloads and the nemesis did their part
	// (expect.go): a run that did not exercise something cannot vouch
	// for it.
	Exercised exercised `json:"exercised"`
	// Unobserved says what the run could not observe (a listing that
	// failed, a drain that did not finish): the verdict cannot vouch for
	// it, so the run fails.
	Unobserved []string `json:"unobserved,omitempty"`
	// Crashed lists the nodes' exits that the harness did not ask for:
	// each is a defect (a panic or a fatal error is at the end of that
	// node's log).
	Crashed []string `json:"crashed,omitempty"`
	// Stories tell the defective messages' histories, for the post-mortem.
	Stories []string `json:"stories,omitempty"`
	// RPC is the RPC workload's verdict (rpc.go), when it ran.
	RPC *rpcVerdict `json:"rpc,omitempty"`
	// Upgrade is the rolling upgrade's verdict (upgrade.go), when one ran.
	Upgrade *upgradeVerdict `json:"upgrade,omitempty"`
}

// waits summarises confirm waits, in seconds; Slowest is the slowest
// publish's story.
type waits struct {
	P50     float64 `json:"p50_s"`
	P99     float64 `json:"p99_s"`
	Max     float64 `json:"max_s"`
	Over10s int     `json:"over_10s"`
	Slowest string  `json:"slowest,omitempty"`
}

// defective reports whether the history shows a defect.
func (v verdict) defective() bool {
	return len(v.Lost)+len(v.Unexpected)+len(v.Duplicated)+len(v.Unflagged)+len(v.Misrouted)+len(v.Corrupted)+len(v.Reordered) > 0 ||
		v.Stranded > 0 || v.RefusedAfterHeal > 0 || len(v.Crashed) > 0 ||
		(v.RPC != nil && !v.RPC.ok()) || (v.Upgrade != nil && !v.Upgrade.ok())
}

// ok reports whether the run passed: no defect, and nothing it could not
// observe.
func (v verdict) ok() bool { return !v.defective() && len(v.Unobserved) == 0 }

// check judges the history, once every client has stopped.
func (h *history) check() verdict {
	h.mu.Lock()
	defer h.mu.Unlock()
	v := verdict{Unobserved: slices.Clone(h.unobserved)}
	var wait []time.Duration
	var slowest uint64
	var slowestWait time.Duration
	for id, r := range h.msgs {
		published := !r.published.IsZero()
		if published && !r.confirmed.IsZero() {
			// Wall clock only (Round(0)), as the history file keeps
			// it: the verdict offline is the same.
			d := r.confirmed.Round(0).Sub(r.published.Round(0))
			wait = append(wait, d)
			if slowest == 0 || d > slowestWait || d == slowestWait && id < slowest {
				slowest, slowestWait = id, d
			}
		}
		if published {
			v.Attempted++
		}
		delivered := len(r.deliveries) > 0
		if delivered {
			v.Delivered++
			v.Deliveries += len(r.deliveries)
		}
		ackSent := slices.ContainsFunc(r.deliveries, func(d delivery) bool { return d.ack.sent() })
		if slices.ContainsFunc(r.deliveries, func(d delivery) bool { return d.corrupt != "" }) {
			v.Corrupted = append(v.Corrupted, id)
		} else if r.bytes > 0 && delivered {
			v.Exercised.Large++
		}
		for i, d := range r.deliveries {
			if d.ack == ackAbandoned {
				v.Exercised.Abandoned++
				if i+1 < len(r.deliveries) && r.deliveries[i+1].redelivered {
					v.Exercised.AbandonedBack++
				}
			}
		}
		switch {
		case !published:
			v.Unexpected = append(v.Unexpected, id)
			continue
		case !r.confirmed.IsZero():
			v.Confirmed++
		default:
			v.Indeterminate++
			if delivered {
				v.IndeterminateDelivered++
			}
		}
		// A confirmed message must be taken, and so must one delivered
		// (the queue had it): the broker hands it out until an ack
		// reaches it.
		if (!r.confirmed.IsZero() || delivered) && !ackSent {
			v.Lost = append(v.Lost, id)
		}
		want := r.queue
		dlq := h.deadLetterTo[r.queue]
		if dlq != "" {
			want = dlq
		}
		if slices.ContainsFunc(r.deliveries, func(d delivery) bool { return d.queue != want }) {
			v.Misrouted = append(v.Misrouted, id)
		}
		if dlq != "" && delivered {
			v.DeadLettered++
			// At-least-once dead-lettering may publish a message to the
			// dead-letter queue more than once, each copy a message of
			// its own there, unflagged; a copy's redeliveries are
			// flagged. Neither is judged.
			for _, d := range r.deliveries[1:] {
				if !d.redelivered {
					v.DeadLetterCopies++
				}
			}
			continue
		}
		if len(r.deliveries) < 2 {
			continue
		}
		// A delivery taken after a round trip showed the broker had
		// read an ack of the message is a duplicate; one before it is a
		// redelivery (the broker may have sent it before it read the
		// ack), and must say so.
		acked, duplicated, unflagged := false, false, false
		var proved uint64
		for i, d := range r.deliveries {
			switch {
			case acked && (d.seq > proved || d.seq == 0):
				duplicated = true
			case i > 0 && !d.redelivered:
				unflagged = true
			}
			if d.ack == ackOK && (!acked || d.proved < proved) {
				acked, proved = true, d.proved
			}
		}
		switch {
		case duplicated:
			v.Duplicated = append(v.Duplicated, id)
		case unflagged:
			v.Unflagged = append(v.Unflagged, id)
		default:
			v.Redelivered++
		}
	}
	if len(wait) > 0 {
		slices.Sort(wait)
		at := func(q float64) float64 { return wait[int(q*float64(len(wait)-1))].Seconds() }
		v.ConfirmWait = waits{P50: at(0.5), P99: at(0.99), Max: at(1), Slowest: h.story(slowest)}
		for _, d := range wait {
			if d > 10*time.Second {
				v.ConfirmWait.Over10s++
			}
		}
	}
	overtaken := h.checkOrder(&v)
	h.checkExercised(&v)
	for _, ids := range [][]uint64{v.Lost, v.Unexpected, v.Duplicated, v.Unflagged, v.Misrouted, v.Corrupted, v.Reordered} {
		slices.Sort(ids)
		for i, id := range ids {
			if i == 20 {
				break
			}
			s := h.story(id)
			if by, ok := overtaken[id]; ok && slices.Contains(v.Reordered, id) {
				s += fmt.Sprintf(" (first delivered after %d, published later on its channel)", by)
			}
			v.Stories = append(v.Stories, s)
		}
	}
	h.countByQueue(&v)
	return v
}

// story is one message's history as a line.
func (h *history) story(id uint64) string {
	r := h.msgs[id]
	ts := func(t time.Time) string { return t.Format("15:04:05.000") }
	var b strings.Builder
	fmt.Fprintf(&b, "%d:", id)
	if !r.published.IsZero() {
		fmt.Fprintf(&b, " published to %s via %s", r.queue, r.via)
		if r.channel != "" {
			fmt.Fprintf(&b, " on channel %s", r.channel)
		}
		if r.bytes > 0 {
			fmt.Fprintf(&b, " (%d bytes)", r.bytes)
		}
		fmt.Fprintf(&b, " at %s;", ts(r.published))
	}
	if !r.confirmed.IsZero() {
		fmt.Fprintf(&b, " confirmed at %s;", ts(r.confirmed))
	}
	for _, d := range r.deliveries {
		fmt.Fprintf(&b, " delivered from %s via %s at %s", d.queue, d.via, ts(d.at))
		if d.redelivered {
			b.WriteString(" (redelivered)")
		}
		switch d.ack {
		case ackNone:
			b.WriteString(", not acked")
		case ackFailed:
			b.WriteString(", ack failed")
		case ackUnconfirmed:
			b.WriteString(", acked (connection lost after)")
		case ackOK:
			b.WriteString(", acked")
		case ackAbandoned:
			b.WriteString(", held when its consumer dropped the connection")
		}
		if d.corrupt != "" {
			fmt.Fprintf(&b, ", corrupt: %s", d.corrupt)
		}
		b.WriteString(";")
	}
	if len(r.deliveries) == 0 {
		b.WriteString(" never delivered")
	}
	return strings.TrimSuffix(b.String(), ";")
}

func (v verdict) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "published %d: confirmed %d, indeterminate %d (%d of them delivered)\n",
		v.Attempted, v.Confirmed, v.Indeterminate, v.IndeterminateDelivered)
	fmt.Fprintf(&b, "delivered %d distinct messages in %d deliveries; %d redelivered (flagged)\n",
		v.Delivered, v.Deliveries, v.Redelivered)
	fmt.Fprintf(&b, "dead-lettered %d, delivered from their dead-letter queues; %d more copies (at-least-once)\n",
		v.DeadLettered, v.DeadLetterCopies)
	w := v.ConfirmWait
	fmt.Fprintf(&b, "confirm wait: p50 %.3f s, p99 %.3f s, max %.3f s, %d over 10 s\n", w.P50, w.P99, w.Max, w.Over10s)
	if w.Slowest != "" {
		fmt.Fprintf(&b, "  slowest: %s\n", w.Slowest)
	}
	fmt.Fprintf(&b, "%s\n", v.Exercised)
	fmt.Fprintf(&b, "lost (confirmed or delivered, never delivered and acked): %d\n", len(v.Lost))
	fmt.Fprintf(&b, "unexpected (delivered, never published): %d\n", len(v.Unexpected))
	fmt.Fprintf(&b, "duplicated (delivered again after an ack the broker read): %d\n", len(v.Duplicated))
	fmt.Fprintf(&b, "unflagged redeliveries: %d\n", len(v.Unflagged))
	fmt.Fprintf(&b, "misrouted (delivered from another queue than published to): %d\n", len(v.Misrouted))
	fmt.Fprintf(&b, "corrupted (body or headers not as published): %d\n", len(v.Corrupted))
	fmt.Fprintf(&b, "reordered (first delivered after a later publish of its channel, where order is promised): %d\n", len(v.Reordered))
	fmt.Fprintf(&b, "stranded (unacknowledged, no consumer, 10 s after the end): %d\n", v.Stranded)
	fmt.Fprintf(&b, "refused after healing (publishes nacked or unconfirmed): %d\n", v.RefusedAfterHeal)
	fmt.Fprintf(&b, "nodes that exited without being asked: %d", len(v.Crashed))
	for _, c := range v.Crashed {
		fmt.Fprintf(&b, "\n  %s", c)
	}
	if byQueue := v.byQueueLines(); len(byQueue) > 0 {
		b.WriteString("\ndefects by queue:")
		for _, l := range byQueue {
			fmt.Fprintf(&b, "\n  %s", l)
		}
	}
	for _, u := range v.Unobserved {
		fmt.Fprintf(&b, "\ncould not observe %s", u)
	}
	for _, s := range v.Stories {
		fmt.Fprintf(&b, "\n  %s", s)
	}
	if v.RPC != nil {
		fmt.Fprintf(&b, "\n%s", v.RPC)
	}
	if v.Upgrade != nil {
		fmt.Fprintf(&b, "\n%s", v.Upgrade)
	}
	return b.String()
}

// writeTSV writes every message's story, one line each, ordered by ID: id,
// queue, node published through, publish and confirm times, then each
// delivery as node@time, a trailing "r" when flagged redelivered. It is
// the whole history the verdict was drawn from, for a post-mortem.
func (h *history) writeTSV(w io.Writer) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	ids := make([]uint64, 0, len(h.msgs))
	for id := range h.msgs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	bw := bufio.NewWriter(w)
	stamp := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.Format("15:04:05.000")
	}
	fmt.Fprintln(bw, "id\tqueue\tvia\tpublished\tconfirmed\tdeliveries")
	for _, id := range ids {
		r := h.msgs[id]
		fmt.Fprintf(bw, "%d\t%s\t%s\t%s\t%s\t", id, r.queue, r.via, stamp(r.published), stamp(r.confirmed))
		for i, d := range r.deliveries {
			if i > 0 {
				bw.WriteByte(' ')
			}
			fmt.Fprintf(bw, "%s@%s", d.via, stamp(d.at))
			if d.redelivered {
				bw.WriteByte('r')
			}
		}
		bw.WriteByte('\n')
	}
	return bw.Flush()
}
