package raftq

import (
	"cmp"
	"slices"
)

// delayed holds returned messages waiting out their delayed retry
// (Config.Retry), in the order they become ready: by time, then by ID,
// as rabbit_fifo's gb_tree keyed {ReadyAt, Index} orders them. A sorted
// slice: a batch of returns (a consumer's channel closing) mostly lands
// at the end, and promotion takes a prefix.
type delayed struct {
	q     []waiting
	bytes int64
}

// waiting is a message and when it is ready again.
type waiting struct {
	at int64
	x  msg
}

func cmpWaiting(a, b waiting) int {
	if c := cmp.Compare(a.at, b.at); c != 0 {
		return c
	}
	return cmp.Compare(a.x.index, b.x.index)
}

func (d *delayed) push(at int64, x msg) {
	w := waiting{at, x}
	i, _ := slices.BinarySearchFunc(d.q, w, cmpWaiting)
	d.q = slices.Insert(d.q, i, w)
	d.bytes += int64(x.size)
}

// next is when the first waiting message is ready; false when none waits.
func (d *delayed) next() (int64, bool) {
	if len(d.q) == 0 {
		return 0, false
	}
	return d.q[0].at, true
}

// clear drops every waiting message and returns how many there were.
func (d *delayed) clear() int {
	n := len(d.q)
	*d = delayed{}
	return n
}

// readyAt is when a message returned for cause at time now is ready
// again, or false when it is ready at once: min(Min × delivery-count, Max)
// after now, delivery-count counted as at least 1 (rabbit_fifo
// calculate_ready_at/4).
func (r DelayedRetry) readyAt(x *msg, cause ReturnCause, now int64) (int64, bool) {
	if !r.delays(cause) {
		return 0, false
	}
	count := max(int64(x.delivery), 1)
	delay := r.Max
	if count <= r.Max/r.Min { // Min × count <= Max, without overflow
		delay = min(r.Min*count, r.Max)
	}
	return addSat(now, delay), true
}

// promote makes ready the waiting messages whose time has come by now, at
// the tail of r's returns in the order they became ready (rabbit_fifo
// expire_shallow/2 moves them to the returns queue before anything else
// looks at the queue).
func (d *delayed) promote(now int64, r *ready) {
	n := 0
	for n < len(d.q) && d.q[n].at <= now {
		x := d.q[n].x
		d.bytes -= int64(x.size)
		r.pushReturned(x)
		n++
	}
	if n > 0 {
		d.q = slices.Delete(d.q, 0, n)
	}
}
