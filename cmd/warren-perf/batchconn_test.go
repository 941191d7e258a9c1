package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// Writes from several goroutines arrive whole and each writer's in order, and Close sends
// what is still pending before closing.
func TestBatchConnDeliversEveryWriteThenCloses(t *testing.T) {
	client, server := tcpPair(t)
	b := newBatchConn(client)
	const writers, writes = 4, 2000
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range writes {
				// Fixed-size records: "w,i" padded, so the reader can split them.
				rec := fmt.Appendf(nil, "%d,%06d;", w, i)
				if _, err := b.Write(rec); err != nil {
					t.Errorf("write: %v", err)
					return
				}
			}
		})
	}
	got := make(chan []byte)
	go func() {
		all, _ := io.ReadAll(server) // until Close's FIN
		got <- all
	}()
	wg.Wait()
	if err := b.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	all := <-got
	next := make([]int, writers)
	for rec := range bytes.SplitSeq(bytes.TrimSuffix(all, []byte(";")), []byte(";")) {
		var w, i int
		if _, err := fmt.Sscanf(string(rec), "%d,%d", &w, &i); err != nil {
			t.Fatalf("torn record %q: %v", rec, err)
		}
		if i != next[w] {
			t.Fatalf("writer %d: record %d after %d", w, i, next[w]-1)
		}
		next[w]++
	}
	for w, n := range next {
		if n != writes {
			t.Errorf("writer %d: %d of %d records arrived", w, n, writes)
		}
	}
	if _, err := b.Write([]byte("late")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("write after close: %v, want net.ErrClosed", err)
	}
}

// A peer that stops reading blocks the writer once batchMaxPending is queued (as a plain
// socket would once the kernel's buffers fill), and the deadline the client library sets
// when it gives up ends both the flusher's write and the wait.
func TestBatchConnBackpressureAndDeadline(t *testing.T) {
	client, _ := tcpPair(t) // the server end never reads
	b := newBatchConn(client)
	chunk := make([]byte, 64<<10)
	blocked := make(chan error, 1)
	go func() {
		for {
			if _, err := b.Write(chunk); err != nil {
				blocked <- err
				return
			}
		}
	}()
	select {
	case err := <-blocked:
		t.Fatalf("writes never blocked, then failed: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	b.mu.Lock()
	pending := len(b.pending)
	b.mu.Unlock()
	if pending < batchMaxPending || pending > batchMaxPending+len(chunk) {
		t.Errorf("pending %d bytes while blocked, want about %d", pending, batchMaxPending)
	}
	if err := client.SetDeadline(time.Now()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-blocked:
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("blocked write ended with %v, want the flusher's timeout", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("deadline did not end the blocked write")
	}
	done := make(chan struct{})
	go func() { b.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("close hangs after a failed write")
	}
}

// Closing while the flusher is stuck writing to a peer that stopped reading, with no
// deadline set, still closes (as closing a plain socket ends its blocked write).
func TestBatchConnCloseCutsOffAStuckWrite(t *testing.T) {
	client, _ := tcpPair(t) // the server end never reads
	b := newBatchConn(client)
	chunk := make([]byte, 64<<10)
	go func() {
		for {
			if _, err := b.Write(chunk); err != nil {
				return
			}
		}
	}()
	time.Sleep(300 * time.Millisecond) // the kernel's buffers fill, the flusher blocks
	start := time.Now()
	closed := make(chan struct{})
	go func() { b.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(batchCloseGrace + 5*time.Second):
		t.Fatal("close hangs on a stuck write")
	}
	if el := time.Since(start); el < batchCloseGrace/2 {
		t.Errorf("closed in %v: did the flusher not block?", el)
	}
	select {
	case <-b.stopped:
	case <-time.After(5 * time.Second):
		t.Error("flusher still running after close")
	}
}
