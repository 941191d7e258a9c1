package queue

import (
	"sync"
	"testing"
)

func TestBudgetAlarm(t *testing.T) {
	b := NewBudget(100)
	b.Add(60)
	if b.Alarm() != nil {
		t.Fatal("alarm below the limit")
	}
	b.Add(40)
	alarm := b.Alarm()
	if alarm == nil {
		t.Fatal("no alarm at the limit")
	}
	b.Release(1)
	select {
	case <-alarm:
	default:
		t.Fatal("alarm did not clear below the limit")
	}
	if b.Alarm() != nil || b.Used() != 99 {
		t.Fatalf("after clearing: alarm %v, used %d", b.Alarm(), b.Used())
	}
	var nilBudget *Budget
	nilBudget.Add(1 << 40)
	if nilBudget.Alarm() != nil {
		t.Fatal("nil budget raised an alarm")
	}
}

func TestBudgetConcurrent(t *testing.T) {
	b := NewBudget(1000)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 10000; j++ {
				b.Add(7)
				b.Alarm()
				b.Release(7)
			}
		}()
	}
	wg.Wait()
	if b.Used() != 0 || b.Alarm() != nil {
		t.Fatalf("used %d, alarm %v after balanced adds and releases", b.Used(), b.Alarm())
	}
}
