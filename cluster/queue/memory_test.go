package queue

import (
	"slices"
	"sync"
	"testing"

	"github.com/warrenmq/warren/cluster/alarm"
)

func TestBudgetAlarm(t *testing.T) {
	set := alarm.NewSet("n1", nil)
	b := NewBudget(100, set)
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
	b := NewBudget(1000, set)
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
