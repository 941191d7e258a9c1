package broker

import (
	"slices"
	"testing"
)

// TestModulusHashSpread: an x-modulus-hash exchange's destinations, one
// per destination whatever its bindings, exchanges first then queues, by
// name; a destination stays while a binding leads there.
func TestModulusHashSpread(t *testing.T) {
	q1a := &binding{key: bindingKey{destination: "q1", routingKey: "a"}}
	q1b := &binding{key: bindingKey{destination: "q1", routingKey: "b"}}
	q2 := &binding{key: bindingKey{destination: "q2"}}
	x := &binding{key: bindingKey{destination: "z", toExchange: true}}
	names := func(spread []*binding) []string {
		var out []string
		for _, b := range spread {
			out = append(out, b.key.destination)
		}
		return out
	}
	var spread []*binding
	for _, b := range []*binding{q2, q1a, x, q1b} {
		spread = spreadAdd(spread, b)
	}
	if got := names(spread); !slices.Equal(got, []string{"z", "q1", "q2"}) {
		t.Fatalf("spread %v, want [z q1 q2]", got)
	}
	spread = spreadRemove(spread, q1a, []*binding{q2, x, q1b})
	if got := names(spread); !slices.Equal(got, []string{"z", "q1", "q2"}) {
		t.Fatalf("after one of q1's bindings went: %v", got)
	}
	spread = spreadRemove(spread, q1b, []*binding{q2, x})
	if got := names(spread); !slices.Equal(got, []string{"z", "q2"}) {
		t.Fatalf("after q1's last binding went: %v", got)
	}
}
