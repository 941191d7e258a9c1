package server

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// A hostile client's cost is bounded in two ways, both per node:
//
//   - connections still in their handshake (before connection.open-ok)
//     are capped at Config.MaxHandshakes; a connection accepted over the
//     cap is closed at once. A handshake holds its buffers and no more:
//     frames are limited to the protocol's minimum size until tune-ok,
//     as RabbitMQ does, and the whole handshake to HandshakeTimeout.
//   - failed logins from one source address make that address's next
//     attempts wait, doubling from LoginFailureDelay up to
//     maxLoginDelay, so a password cannot be guessed at wire speed. A
//     successful login clears the address's record; records older than
//     loginFailureMemory are forgotten.

const (
	maxLoginDelay      = 5 * time.Second
	loginFailureMemory = 10 * time.Minute
	// maxFailureRecords bounds the throttle's memory under a spray of
	// source addresses; past it, records are forgotten (forgetOldest).
	maxFailureRecords = 1 << 16
)

// handshakeGuard counts the connections in their handshake.
type handshakeGuard struct {
	inFlight atomic.Int64
	refused  atomic.Uint64 // connections closed for being over the cap
}

// enter admits one more handshake unless max are in flight (max <= 0: no cap).
func (g *handshakeGuard) enter(max int) bool {
	if n := g.inFlight.Add(1); max > 0 && n > int64(max) {
		g.inFlight.Add(-1)
		g.refused.Add(1)
		return false
	}
	return true
}

func (g *handshakeGuard) leave() { g.inFlight.Add(-1) }

// loginThrottle remembers failed logins per source address.
type loginThrottle struct {
	base time.Duration // first delay; 0 turns the throttle off

	mu       sync.Mutex
	failures map[string]loginFailures
}

type loginFailures struct {
	count int
	last  time.Time
}

func sourceOf(addr net.Addr) string {
	if a, ok := addr.(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	return host
}

// delay is how long a login from addr waits before it is checked.
func (t *loginThrottle) delay(addr net.Addr, now time.Time) time.Duration {
	if t.base <= 0 || addr == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	f, ok := t.failures[sourceOf(addr)]
	if !ok || now.Sub(f.last) > loginFailureMemory {
		return 0
	}
	d := t.base
	for i := 1; i < f.count && d < maxLoginDelay; i++ {
		d *= 2
	}
	return min(d, maxLoginDelay)
}

// failed records a refused login from addr.
func (t *loginThrottle) failed(addr net.Addr, now time.Time) {
	if t.base <= 0 || addr == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.failures == nil {
		t.failures = make(map[string]loginFailures)
	}
	if len(t.failures) >= maxFailureRecords {
		t.forgetOldest(now)
	}
	src := sourceOf(addr)
	f := t.failures[src]
	if now.Sub(f.last) > loginFailureMemory {
		f.count = 0
	}
	f.count++
	f.last = now
	t.failures[src] = f
}

// succeeded clears addr's record.
func (t *loginThrottle) succeeded(addr net.Addr) {
	if t.base <= 0 || addr == nil {
		return
	}
	t.mu.Lock()
	delete(t.failures, sourceOf(addr))
	t.mu.Unlock()
}

// forgetOldest drops expired records and, if that freed too little
// (addresses spraying failures), every record: the throttle starts over
// rather than grow.
func (t *loginThrottle) forgetOldest(now time.Time) {
	for k, f := range t.failures {
		if now.Sub(f.last) > loginFailureMemory {
			delete(t.failures, k)
		}
	}
	if len(t.failures) >= maxFailureRecords/2 {
		clear(t.failures)
	}
}
