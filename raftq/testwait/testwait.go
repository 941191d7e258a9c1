// Package testwait waits, in tests only, for state a test can observe:
// a leader elected, a message delivered, a metric moved. Waiting on the
// state instead of sleeping a fixed time keeps a test quick on a fast
// machine and correct on a loaded one.
//
// It imports nothing from Warren, so that the tests of every package,
// from raftq up to cmd, can use it.
package testwait

import (
	"testing"
	"time"
)

// The first poll comes soon after the first check, since most conditions
// hold within milliseconds; later ones back off so that a long wait does
// not spin on a shared machine.
const (
	firstPoll = 5 * time.Millisecond
	maxPoll   = 100 * time.Millisecond
)

// For polls cond until it returns true, and fails t if it has not within
// timeout. what says what was awaited ("a leader for q", "3 deliveries"),
// for the failure message.
func For(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Until(timeout, cond) {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// ForNil polls try until it returns nil, and fails t with try's last
// error if it has not within timeout.
func ForNil(t testing.TB, timeout time.Duration, what string, try func() error) {
	t.Helper()
	var last error
	if !Until(timeout, func() bool { last = try(); return last == nil }) {
		t.Fatalf("timed out after %v waiting for %s: %v", timeout, what, last)
	}
}

// Until polls cond until it returns true or timeout passes, and says
// whether it did. It does not fail a test, so it suits a goroutine other
// than the test's own, or a caller with more to say on failure.
func Until(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	poll := firstPoll
	for {
		if cond() {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		time.Sleep(min(poll, left))
		poll = min(2*poll, maxPoll)
	}
}
