package main

import (
	"bufio"
	"net"
	"sync"
	"time"
)

// batchConn is a net.Conn that gathers writes and sends them from one goroutine, and reads
// through a large buffer.
//
// Why: broker and load tool share this machine's cores, and amqp091-go flushes after every
// publish and every ack, so a producer and a consumer cost the tool two write calls per
// message (about half its CPU on loopback, where the sender's write also runs the receiver's
// TCP stack) and the broker as many reads. Here a write only appends to a buffer; the flusher
// sends whatever gathered while its previous write was in the kernel, one call for many
// frames under load and one per frame when idle. The tool then measures the broker rather
// than itself: both brokers get the CPU back, and both are measured with the same tool.
// --batch-writes=false restores one write per flush of the client library.
type batchConn struct {
	net.Conn
	r *bufio.Reader

	mu      sync.Mutex
	drained *sync.Cond // pending shrank, or the flusher stopped
	pending []byte
	err     error // the flusher's write error; every later Write returns it
	closing bool
	wake    chan struct{} // capacity 1: pending has data, or closing
	stopped chan struct{} // the flusher returned
}

const (
	// batchReadSize: a consumer's reads take many deliveries at once (the client library's own
	// buffer is 4 KiB, about three 1 KB deliveries).
	batchReadSize = 64 << 10
	// batchMaxPending bounds what a writer may get ahead of the socket: beyond it, Write waits,
	// so a broker that stops reading (flow control) still blocks the producer.
	batchMaxPending = 256 << 10
)

func newBatchConn(c net.Conn) *batchConn {
	b := &batchConn{
		Conn:    c,
		r:       bufio.NewReaderSize(c, batchReadSize),
		wake:    make(chan struct{}, 1),
		stopped: make(chan struct{}),
	}
	b.drained = sync.NewCond(&b.mu)
	go b.flush()
	return b
}

func (b *batchConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// Write queues p for the flusher. An error of an earlier write is returned here, later than
// with a plain connection; the client library then closes the connection as it would have.
func (b *batchConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	for len(b.pending) >= batchMaxPending && b.err == nil && !b.closing {
		b.drained.Wait()
	}
	switch {
	case b.err != nil:
		err := b.err
		b.mu.Unlock()
		return 0, err
	case b.closing:
		b.mu.Unlock()
		return 0, net.ErrClosed
	}
	b.pending = append(b.pending, p...)
	b.mu.Unlock()
	b.poke()
	return len(p), nil
}

// poke wakes the flusher, unless a wake is already waiting for it.
func (b *batchConn) poke() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// flush writes what is pending until the connection closes, then what is left.
func (b *batchConn) flush() {
	defer close(b.stopped)
	var out []byte
	for range b.wake {
		b.mu.Lock()
		out, b.pending = b.pending, out[:0]
		closing := b.closing
		b.drained.Broadcast()
		b.mu.Unlock()
		if len(out) > 0 {
			if _, err := b.Conn.Write(out); err != nil {
				b.mu.Lock()
				b.err = err
				b.drained.Broadcast()
				b.mu.Unlock()
				return
			}
		}
		if closing {
			return
		}
	}
}

// batchCloseGrace bounds how long Close waits for what is pending to go out: a peer that
// stopped reading would otherwise hold Close forever, where closing a plain socket ends its
// blocked write at once.
const batchCloseGrace = 2 * time.Second

// Close sends what is pending (connection.close-ok, say) and closes the connection; a write
// still blocked after batchCloseGrace (or past a deadline set on the connection) is cut off.
func (b *batchConn) Close() error {
	b.mu.Lock()
	b.closing = true
	b.drained.Broadcast()
	b.mu.Unlock()
	b.poke()
	select {
	case <-b.stopped:
	case <-time.After(batchCloseGrace):
	}
	return b.Conn.Close()
}
