package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/raftq/testwait"
)

// TestPeekAgainstRealCluster: warrenctl peek, asked through each node in
// turn, names the ready messages of a quorum queue in the order they are
// then delivered (a returned message first, then by priority), with the
// fields and x-delivery-count the deliveries carry, and takes nothing.
func TestPeekAgainstRealCluster(t *testing.T) {
	ms := nodetest.StartCluster(t, 3)
	ch := ms[0].Channel()
	if _, err := ch.QueueDeclare("inbox", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("plain", true, false, false, false, amqp091.Table{"x-queue-type": "classic"}); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	publish := func(p amqp091.Publishing) {
		dc, err := ch.PublishWithDeferredConfirm("", "inbox", false, false, p)
		if err != nil || !dc.Wait() {
			t.Fatalf("publish: %v", err)
		}
	}
	publish(amqp091.Publishing{Body: []byte("first"), ContentType: "text/plain", MessageId: "m-1",
		Headers: amqp091.Table{"tenant": "acme", "attempt": int32(3)}})
	publish(amqp091.Publishing{Body: []byte("urgent"), Priority: 9, CorrelationId: "c-2"})
	publish(amqp091.Publishing{Body: []byte(strings.Repeat("x", 100)), DeliveryMode: 2})
	publish(amqp091.Publishing{Body: []byte{0xff, 0xfe, 0x00}, Headers: amqp091.Table{"CC": []any{"also.here"}}})

	// The urgent one is taken and rejected back: it comes first now, with
	// whatever delivery count a delivery will show.
	c := ms[1].Channel()
	d, ok, err := c.Get("inbox", false)
	if err != nil || !ok || string(d.Body) != "urgent" {
		t.Fatalf("get: %v %v %q", err, ok, d.Body)
	}
	if err := d.Reject(true); err != nil {
		t.Fatal(err)
	}

	type peeked struct {
		Leader  string
		Message map[string]any
	}
	peekAt := func(node *nodetest.Member, pos string) (peeked, int, string) {
		var p peeked
		code, out, errOut := warrenctl(t, "--node", node.InternalAddr().String(), "--json", "peek", "inbox", pos)
		if code == 0 {
			if err := json.Unmarshal([]byte(out), &p); err != nil {
				t.Fatalf("peek %s: %v: %s", pos, err, out)
			}
		}
		return p, code, errOut
	}
	var first peeked
	testwait.For(t, 10*time.Second, "the rejected message at position 1", func() bool {
		p, code, _ := peekAt(ms[2], "1")
		first = p
		return code == 0 && first.Message["payload (max 64 bytes)"] == "urgent"
	})
	if first.Leader == "" || first.Message["correlation_id"] != "c-2" || first.Message["priority"] != float64(9) {
		t.Errorf("position 1: %+v", first)
	}

	for i, node := range ms {
		p, code, errOut := peekAt(node, "2")
		if code != 0 {
			t.Fatalf("peek 2 through node %d: exit %d: %s", i, code, errOut)
		}
		m := p.Message
		if m["payload (max 64 bytes)"] != "first" || m["content_type"] != "text/plain" || m["message_id"] != "m-1" ||
			m["header.tenant"] != "acme" || m["header.attempt"] != float64(3) || m["header.x-delivery-count"] != float64(0) ||
			m["exchange"] != "" || !slices.Equal(m["routing_keys"].([]any), []any{"inbox"}) {
			t.Errorf("position 2 through node %d: %v", i, m)
		}
	}
	p, code, errOut := peekAt(ms[0], "3")
	if code != 0 || p.Message["payload (max 64 bytes)"] != strings.Repeat("x", 64) || p.Message["body size"] != float64(100) ||
		p.Message["delivery_mode"] != float64(2) {
		t.Errorf("position 3: exit %d %s: %v", code, errOut, p.Message)
	}
	p, code, errOut = peekAt(ms[0], "4")
	if code != 0 || p.Message["payload (max 64 bytes, base64)"] != "//4A" ||
		!slices.Equal(p.Message["routing_keys"].([]any), []any{"inbox", "also.here"}) {
		t.Errorf("position 4: exit %d %s: %v", code, errOut, p.Message)
	}
	if _, code, errOut = peekAt(ms[1], "5"); code != 1 ||
		errOut != "warrenctl: queue 'inbox' in vhost '/' does not have a message at position 5\n" {
		t.Errorf("position 5: exit %d: %q", code, errOut)
	}

	// Peeking took nothing: the deliveries come in the order peeked, the
	// first with the delivery count peek showed.
	cons, err := c.Consume("inbox", "reader", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"urgent", "first", strings.Repeat("x", 100), "\xff\xfe\x00"}
	for i, body := range want {
		select {
		case d := <-cons:
			if string(d.Body) != body {
				t.Fatalf("delivery %d: %q, want %q", i, d.Body, body)
			}
			count, _ := d.Headers["x-delivery-count"].(int64) // absent: 0
			if i == 0 && float64(count) != first.Message["header.x-delivery-count"] {
				t.Errorf("delivered with x-delivery-count %d, peek showed %v", count, first.Message["header.x-delivery-count"])
			}
			if err := d.Ack(false); err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("delivery %d did not come", i)
		}
	}

	if err := c.Cancel("reader", false); err != nil {
		t.Fatal(err)
	}

	node := ms[0].InternalAddr().String()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"peek", "inbox", "0"}, `warrenctl: position value must be a positive integer, not "0"` + "\n"},
		{[]string{"peek", "plain", "1"}, "warrenctl: cannot peek into queue 'plain' in vhost '/': it is not a quorum queue\n"},
		{[]string{"peek", "nope", "1"}, "warrenctl: queue 'nope' in vhost '/' not found\n"},
	} {
		if code, _, errOut := warrenctl(t, append([]string{"--node", node}, tc.args...)...); code != 1 || errOut != tc.want {
			t.Errorf("%v: exit %d: %q, want %q", tc.args, code, errOut, tc.want)
		}
	}
	publish(amqp091.Publishing{Body: []byte("hello"), Headers: amqp091.Table{"when": time.Unix(1764900000, 0)}})
	code, out, errOut := warrenctl(t, "--node", node, "peek", "inbox", "1")
	if code != 0 || !strings.Contains(out, "payload (max 64 bytes)") || !strings.Contains(out, "hello") ||
		!strings.Contains(out, "header.when") || !strings.Contains(out, "2025-12-05T02:00:00Z") {
		t.Errorf("peek as text: exit %d %s:\n%s", code, errOut, out)
	}
	t.Logf("\n%s", out)
}
