package raftq

import (
	"reflect"
	"testing"
)

func TestHandouts(t *testing.T) {
	var h Handouts
	a := h.Add(10, 1)
	b := h.Add(11, 2)
	c := h.Add(12, 1)
	again := h.Add(10, 2) // message 10 handed out a second time
	if a == again {
		t.Fatal("a second hand-out of a message reused the delivery ID")
	}
	order, groups := h.Take([]uint64{b, a, c, 999})
	if !reflect.DeepEqual(order, []ConsumerID{2, 1}) ||
		!reflect.DeepEqual(groups, map[ConsumerID][]uint64{2: {11}, 1: {10, 12}}) {
		t.Fatalf("Take: %v %v", order, groups)
	}
	if order, _ := h.Take([]uint64{a}); len(order) != 0 {
		t.Fatal("a delivery was taken twice")
	}
	if order, groups := h.Take([]uint64{again}); len(order) != 1 || groups[2][0] != 10 {
		t.Fatalf("second hand-out: %v %v", order, groups)
	}
	h.Add(13, 3)
	h.Reset()
	if order, _ := h.Take([]uint64{5}); len(order) != 0 {
		t.Fatal("Reset kept a delivery")
	}
}
