package forward

import (
	"context"
	"sync"
)

// Settlements a router sends until a leader takes them (settlements.later)
// are acks, nacks and rejects the broker has accepted from a client: the
// channel has answered what the client sent after them, and the client
// will not send them again. A node that stops gracefully hands its
// leaderships off first, and what its members are told while the
// leaderships move, and just after, is passed on to the new leaders from
// here. Dropping those settlements with the router would leave their
// messages checked out to consumers that believe them settled, to be
// delivered again once those consumers go; RabbitMQ applies every
// settlement that reaches a quorum queue's leader through its log. So they
// outlive the router's Close, up to the deadline Close is given
// (CloseWithin), and end at once with Delete: the queue is gone.
type passedOn struct {
	// ctx is their lifetime: it ends with Delete, or when Close gives up
	// on them. It carries outlivesClose, so that waits under it do not end
	// with the router's own context (Router.sleep).
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	pending int
	idle    chan struct{} // closed while pending is 0
	ended   bool
}

// outlivesClose marks a context whose calls go on after the router's
// context is done (passedOn).
type outlivesClose struct{}

func (p *passedOn) init() {
	p.ctx, p.cancel = context.WithCancel(context.WithValue(context.Background(), outlivesClose{}, true))
	p.idle = make(chan struct{})
	close(p.idle)
}

// start runs fn on a goroutine of its own, counted as pending until it
// returns; false, and fn not run, once they ended.
func (p *passedOn) start(fn func()) bool {
	p.mu.Lock()
	if p.ended {
		p.mu.Unlock()
		return false
	}
	if p.pending == 0 {
		p.idle = make(chan struct{})
	}
	p.pending++
	p.mu.Unlock()
	go func() {
		defer p.done()
		fn()
	}()
	return true
}

func (p *passedOn) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending--
	if p.pending == 0 {
		close(p.idle)
	}
}

// await waits until none is pending, or ctx ends; it returns how many
// were still pending then.
func (p *passedOn) await(ctx context.Context) int {
	p.mu.Lock()
	idle := p.idle
	p.mu.Unlock()
	select {
	case <-idle:
		return 0
	case <-ctx.Done():
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pending
}

// end stops those still pending and waits for their goroutines; none
// starts after it.
func (p *passedOn) end() {
	p.mu.Lock()
	p.ended = true
	idle := p.idle
	p.mu.Unlock()
	p.cancel()
	<-idle
}
