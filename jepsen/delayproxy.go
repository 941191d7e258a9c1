package main

import (
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// delayProxy is a TCP proxy that delays everything it forwards, each way:
// the latency fault puts one between every two nodes. Each chunk read is
// written after the delay (a base plus random jitter) counted from when it
// was read, and never before the chunk read ahead of it, so the stream
// keeps its order and its throughput while every byte arrives late, as on
// a long link.
type delayProxy struct {
	ln     net.Listener
	target string
	base   time.Duration
	jitter time.Duration

	rngMu sync.Mutex
	rng   *rand.Rand

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup

	accepted  atomic.Int64
	forwarded atomic.Int64
}

// delayChunks is how many chunks read but not yet written one direction
// of a connection holds; a reader that gets this far ahead waits.
const delayChunks = 1024

// startDelayProxy listens on listen (host:port, port 0 for any) and
// forwards every connection to target with base ± jitter added each way.
func startDelayProxy(listen, target string, base, jitter time.Duration, seed uint64) (*delayProxy, error) {
	if base < 0 || jitter < 0 || jitter > base {
		return nil, errors.New("delay proxy: want 0 <= jitter <= base")
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	p := &delayProxy{
		ln: ln, target: target, base: base, jitter: jitter,
		rng:   rand.New(rand.NewPCG(seed, seed^0x6a09e667f3bcc908)),
		conns: map[net.Conn]struct{}{},
	}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// addr is the address the proxy listens on.
func (p *delayProxy) addr() string { return p.ln.Addr().String() }

// delay is one chunk's delay: base, plus or minus up to jitter.
func (p *delayProxy) delay() time.Duration {
	if p.jitter == 0 {
		return p.base
	}
	p.rngMu.Lock()
	defer p.rngMu.Unlock()
	return p.base - p.jitter + time.Duration(p.rng.Int64N(int64(2*p.jitter)+1))
}

func (p *delayProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		p.wg.Add(1)
		go p.handle(c)
	}
}

// track adds c to the connections close ends; false once closed.
func (p *delayProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *delayProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *delayProxy) handle(client net.Conn) {
	defer p.wg.Done()
	defer client.Close()
	if !p.track(client) {
		return
	}
	defer p.untrack(client)
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	defer server.Close()
	if !p.track(server) {
		return
	}
	defer p.untrack(server)
	var both sync.WaitGroup
	both.Add(2)
	go func() { defer both.Done(); p.pipe(client, server) }()
	go func() { defer both.Done(); p.pipe(server, client) }()
	both.Wait()
}

// chunk is bytes read from one side, due to be written to the other.
type chunk struct {
	b   []byte
	due time.Time
}

// pipe forwards src to dst, each chunk delay() after it was read. When
// src ends, dst's write side is closed once every chunk is written; when
// a write fails, both connections are closed.
func (p *delayProxy) pipe(src, dst net.Conn) {
	queue := make(chan chunk, delayChunks)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range queue {
			if wait := time.Until(c.due); wait > 0 {
				time.Sleep(wait)
			}
			if _, err := dst.Write(c.b); err != nil {
				src.Close()
				dst.Close()
				for range queue {
				}
				return
			}
			p.forwarded.Add(int64(len(c.b)))
		}
		if tc, ok := dst.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
	}()
	var last time.Time
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			due := time.Now().Add(p.delay())
			if due.Before(last) {
				due = last // in order: never before the chunk ahead
			}
			last = due
			queue <- chunk{b: append([]byte(nil), buf[:n]...), due: due}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				dst.Close()
			}
			break
		}
	}
	close(queue)
	<-done
}

// close stops listening, ends every connection and waits for the
// proxy's goroutines.
func (p *delayProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
