package main

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"testing"
	"time"
)

// echoServer answers every connection with what it reads, until the
// test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

// roundTrip times one byte there and back over c.
func roundTrip(t *testing.T, c net.Conn) time.Duration {
	t.Helper()
	start := time.Now()
	if _, err := c.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	return time.Since(start)
}

// TestDelayProxyDelaysEachWay: a round trip through the proxy takes at
// least twice its smallest delay, and not much more than twice its
// largest; a direct one takes far less.
func TestDelayProxyDelaysEachWay(t *testing.T) {
	target := echoServer(t)
	p, err := startDelayProxy("127.0.0.1:0", target, 80*time.Millisecond, 20*time.Millisecond, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	c, err := net.Dial("tcp", p.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 5 {
		rtt := roundTrip(t, c)
		if rtt < 2*60*time.Millisecond || rtt > 2*100*time.Millisecond+150*time.Millisecond {
			t.Errorf("round trip through the proxy took %s, want about 120-200ms", rtt)
		}
	}
	d, err := net.Dial("tcp", target)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if rtt := roundTrip(t, d); rtt > 50*time.Millisecond {
		t.Errorf("direct round trip took %s", rtt)
	}
	if p.accepted.Load() != 1 {
		t.Errorf("accepted %d connections, want 1", p.accepted.Load())
	}
}

// TestDelayProxyKeepsTheStream: a megabyte written in pieces comes back
// whole and in order, and the half-close reaches the far side.
func TestDelayProxyKeepsTheStream(t *testing.T) {
	p, err := startDelayProxy("127.0.0.1:0", echoServer(t), 5*time.Millisecond, 5*time.Millisecond, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	c, err := net.Dial("tcp", p.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := make([]byte, 1<<20)
	rand.Read(want)
	go func() {
		for b := want; len(b) > 0; {
			n := min(len(b), 1000+len(b)%7000)
			c.Write(b[:n])
			b = b[n:]
		}
		c.(*net.TCPConn).CloseWrite()
	}()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read back: %v (after %d bytes)", err, len(got))
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("got %d bytes back, not the %d sent in order", len(got), len(want))
	}
	if p.forwarded.Load() != 2<<20 {
		t.Errorf("forwarded %d bytes, want %d", p.forwarded.Load(), 2<<20)
	}
}

// TestDelayProxyCloseEndsConnections: closing the proxy ends the
// connections through it, so that their ends dial again.
func TestDelayProxyCloseEndsConnections(t *testing.T) {
	p, err := startDelayProxy("127.0.0.1:0", echoServer(t), time.Millisecond, 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip(t, c)
	closed := make(chan struct{})
	go func() { p.close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("close did not return")
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("the connection still reads after the proxy closed")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the connection stayed open after the proxy closed")
	}
	if _, err := startDelayProxy("127.0.0.1:0", "x", time.Millisecond, 2*time.Millisecond, 4); err == nil {
		t.Error("jitter above base was taken")
	}
}
