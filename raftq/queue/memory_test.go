package queue

import (
	"slices"
	"sync"
	"testing"

	"github.com/warrenmq/warren/cluster/alarm"
)

func TestBudgetAlarm(t *testing.T) {
	set := alarm.NewSet("n1", nil)
	b := NewBudget(100, set.Flip(alarm.Memory))
	b.Add(60)
	if b.On() || len(set.Local()) != 0 {
		t.Fatal("alarm below the limit")
	}
	b.Add(40)
	if !b.On() || !slices.Equal(set.Local(), []alarm.Resource{alarm.Memory}) {
		t.Fatalf("at the limit: on %v, alarms %v", b.On(), set.Local())
	}
	b.Release(1)
	if b.On() || len(set.Local()) != 0 || b.Used() != 99 {
		t.Fatalf("below the limit again: on %v, alarms %v, used %d", b.On(), set.Local(), b.Used())
	}
	// A lower limit raises the alarm at once, and none clears it.
	b.SetLimit(50)
	if !b.On() || len(set.Local()) != 1 {
		t.Fatalf("after lowering the limit under the use: on %v, alarms %v", b.On(), set.Local())
	}
	b.SetLimit(0)
	if b.On() || len(set.Local()) != 0 {
		t.Fatalf("with no limit: on %v, alarms %v", b.On(), set.Local())
	}
	b.Add(1 << 40)
	if b.On() {
		t.Fatal("alarm with no limit")
	}
	var nilBudget *Budget
	nilBudget.Add(1 << 40)
	if nilBudget.On() || nilBudget.Used() != 0 {
		t.Fatal("nil budget counted")
	}
}

func TestBudgetConcurrent(t *testing.T) {
	set := alarm.NewSet("n1", nil)
	b := NewBudget(1000, set.Flip(alarm.Memory))
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 10000; j++ {
				b.Add(7)
				b.On()
				b.Release(7)
			}
		}()
	}
	wg.Wait()
	if b.Used() != 0 || b.On() || len(set.Local()) != 0 {
		t.Fatalf("used %d, on %v, alarms %v after balanced adds and releases", b.Used(), b.On(), set.Local())
	}
}

// TestBudgetObserve checks that the memory monitor's looks set the
// memory the alarm counts, and that message bytes move it at once in
// between: a look includes the bytes held when it was taken.
func TestBudgetObserve(t *testing.T) {
	set := alarm.NewSet("n1", nil)
	b := NewBudget(1000, set.Flip(alarm.Memory))
	b.Add(100)
	if b.Observe(900); b.On() || b.Used() != 900 || b.Held() != 100 {
		t.Fatalf("after a look at 900 holding 100: on %v, used %d, held %d", b.On(), b.Used(), b.Held())
	}
	b.Add(100) // the rest of the node's 800 and 200 held
	if !b.On() || b.Used() != 1000 || len(set.Local()) != 1 {
		t.Fatalf("at the limit by message bytes: on %v, used %d, alarms %v", b.On(), b.Used(), set.Local())
	}
	b.Release(200)
	if b.On() || b.Used() != 800 {
		t.Fatalf("after releasing the messages: on %v, used %d", b.On(), b.Used())
	}
	// The rest of the node grows: the next look raises the alarm with
	// nothing held, and one that sees it shrink clears it.
	if b.Observe(1200); !b.On() || len(set.Local()) != 1 {
		t.Fatalf("a look over the limit: on %v, alarms %v", b.On(), set.Local())
	}
	if b.Observe(400); b.On() || len(set.Local()) != 0 || b.Used() != 400 {
		t.Fatalf("a look under the limit: on %v, alarms %v, used %d", b.On(), set.Local(), b.Used())
	}
	// A look never counts less than the messages held.
	b.Add(300)
	if b.Observe(100); b.Used() != 300 {
		t.Fatalf("used %d after a look under the bytes held (300)", b.Used())
	}
}
