package testwait

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// fatalTB records Fatalf instead of stopping the test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) { f.msg = fmt.Sprintf(format, args...) }

func TestForReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	start := time.Now()
	For(t, 5*time.Second, "the third poll", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("polled %d times after it held, want 3", n)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("took %v for three polls", took)
	}
}

func TestForFailsAfterTheTimeout(t *testing.T) {
	f := &fatalTB{TB: t}
	start := time.Now()
	For(f, 50*time.Millisecond, "never", func() bool { return false })
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Fatalf("gave up after %v, before the timeout", took)
	}
	if !strings.Contains(f.msg, "never") {
		t.Fatalf("failure %q does not say what was awaited", f.msg)
	}
}

func TestForNilReportsTheLastError(t *testing.T) {
	f := &fatalTB{TB: t}
	n := 0
	ForNil(f, 30*time.Millisecond, "an answer", func() error { n++; return fmt.Errorf("attempt %d", n) })
	if want := fmt.Sprintf("attempt %d", n); !strings.HasSuffix(f.msg, want) {
		t.Fatalf("failure %q, want it to end with the last error %q", f.msg, want)
	}
}

func TestUntilChecksOnceMoreAtTheDeadline(t *testing.T) {
	start := time.Now()
	if !Until(20*time.Millisecond, func() bool { return time.Since(start) >= 20*time.Millisecond }) {
		t.Fatal("a condition that holds at the deadline was reported as not holding")
	}
}
