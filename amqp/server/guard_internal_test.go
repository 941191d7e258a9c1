package server

import (
	"net"
	"testing"
	"time"
)

func TestLoginThrottleDoublesAndForgets(t *testing.T) {
	th := loginThrottle{base: 100 * time.Millisecond}
	a := &net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 1}
	b := &net.TCPAddr{IP: net.ParseIP("192.0.2.8"), Port: 1}
	now := time.Unix(1000, 0)
	if d := th.delay(a, now); d != 0 {
		t.Fatalf("no failures yet: %v", d)
	}
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000}
	for i, w := range want {
		th.failed(a, now)
		if d := th.delay(a, now); d != w*time.Millisecond && !(w == 5000 && d == maxLoginDelay) {
			t.Fatalf("after %d failures: %v, want %v", i+1, d, w*time.Millisecond)
		}
	}
	if d := th.delay(b, now); d != 0 {
		t.Fatalf("another address was slowed: %v", d)
	}
	if d := th.delay(a, now.Add(loginFailureMemory+time.Second)); d != 0 {
		t.Fatalf("an old record still slows: %v", d)
	}
	th.succeeded(a)
	if d := th.delay(a, now); d != 0 {
		t.Fatalf("a successful login did not clear the record: %v", d)
	}
}

func TestLoginThrottleMemoryIsBounded(t *testing.T) {
	th := loginThrottle{base: time.Millisecond}
	now := time.Unix(1000, 0)
	for i := 0; i < maxFailureRecords+1000; i++ {
		ip := net.IPv4(10, byte(i>>16), byte(i>>8), byte(i))
		th.failed(&net.TCPAddr{IP: ip}, now.Add(time.Duration(i)*time.Millisecond))
	}
	if n := len(th.failures); n > maxFailureRecords {
		t.Fatalf("%d records kept, at most %d", n, maxFailureRecords)
	}
}

func TestHandshakeGuard(t *testing.T) {
	var g handshakeGuard
	if !g.enter(2) || !g.enter(2) {
		t.Fatal("under the cap refused")
	}
	if g.enter(2) {
		t.Fatal("over the cap admitted")
	}
	g.leave()
	if !g.enter(2) {
		t.Fatal("a freed slot refused")
	}
	if !g.enter(0) {
		t.Fatal("no cap refused")
	}
	if g.refused.Load() != 1 {
		t.Fatalf("refused %d", g.refused.Load())
	}
}
