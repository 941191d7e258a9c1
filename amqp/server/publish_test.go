package server_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/amqp/server"
)

func TestMandatoryReturnPrecedesConfirm(t *testing.T) {
	n := startNode(t)
	ch := openChannel(t, n.dial(t))
	declareQueue(t, ch, "routed")
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	const burst = 300
	returns := ch.NotifyReturn(make(chan amqp091.Return, burst))
	// amqp091-go reads frames in order on one goroutine and hands each to
	// these channels as it reads it. returns is buffered, confirms is
	// not: while the reader waits for us to take a confirm it cannot have
	// read anything that came after the ack, so a return is in returns
	// when its confirm is received if and only if it came first on the
	// wire.
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation))
	// If the test stops reading early, keep the client's reader from
	// blocking on confirms forever, or closing the connection would hang.
	t.Cleanup(func() {
		go func() {
			for range confirms {
			}
		}()
	})
	ctx := context.Background()
	for i, tc := range []struct {
		exchange, key string
		mandatory     bool
		wantReturn    bool
	}{
		{"amq.direct", "nowhere", true, true},
		{"", "no-such-queue", true, true},
		{"", "routed", true, false},
		{"amq.direct", "nowhere", false, false}, // unroutable, not mandatory: dropped
	} {
		err := ch.PublishWithContext(ctx, tc.exchange, tc.key, tc.mandatory, false, amqp091.Publishing{
			Body: []byte("body"), MessageId: "m", Headers: amqp091.Table{"h": "v"},
		})
		if err != nil {
			t.Fatal(err)
		}
		var cf amqp091.Confirmation
		select {
		case cf = <-confirms:
		case <-time.After(5 * time.Second):
			t.Fatalf("publish %d: no confirm", i)
		}
		// An unroutable message is confirmed with an ack.
		if !cf.Ack || cf.DeliveryTag != uint64(i+1) {
			t.Fatalf("publish %d: confirm %+v, want ack of %d", i, cf, i+1)
		}
		select {
		case r := <-returns:
			if !tc.wantReturn {
				t.Fatalf("publish %d: unexpected return %+v", i, r)
			}
			if r.ReplyCode != 312 || r.ReplyText != "NO_ROUTE" || r.Exchange != tc.exchange || r.RoutingKey != tc.key ||
				string(r.Body) != "body" || r.MessageId != "m" || r.Headers["h"] != "v" {
				t.Fatalf("publish %d: return %+v", i, r)
			}
		default:
			if tc.wantReturn {
				t.Fatalf("publish %d: the confirm arrived before (or without) the basic.return", i)
			}
		}
	}
	if got := drainQueue(t, ch, "routed"); len(got) != 1 {
		t.Fatalf("routed queue holds %d messages, want 1", len(got))
	}

	// A burst, so that returns and confirms share the writer's batches.
	go func() {
		for range burst {
			if err := ch.PublishWithContext(ctx, "amq.direct", "nowhere", true, false, amqp091.Publishing{}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	returned := 0
	for i := range burst {
		var cf amqp091.Confirmation
		select {
		case cf = <-confirms:
		case <-time.After(5 * time.Second):
			t.Fatalf("burst: only %d confirms", i)
		}
	drain:
		for {
			select {
			case <-returns:
				returned++
			default:
				break drain
			}
		}
		if want := uint64(4 + i + 1); !cf.Ack || cf.DeliveryTag != want {
			t.Fatalf("burst: confirm %+v, want ack of %d", cf, want)
		}
		if returned < i+1 {
			t.Fatalf("burst: confirm of publish %d arrived with only %d returns before it", i+1, returned)
		}
	}
}

func TestPublisherConfirmsMany(t *testing.T) {
	n := startNode(t)
	ch := openChannel(t, n.dial(t))
	declareQueue(t, ch, "conf.a")
	declareQueue(t, ch, "conf.b")
	if err := ch.ExchangeDeclare("conf.fan", "fanout", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"conf.a", "conf.b"} {
		if err := ch.QueueBind(q, "", "conf.fan", false, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	const total = 1000
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, total))
	// Mix publishes to one queue, to two (via fanout) and to none, so
	// that confirms of different kinds interleave and the server can
	// group them with multiple=true.
	done := make(chan error, 1)
	go func() {
		for i := range total {
			var ex, key string
			switch i % 3 {
			case 0:
				ex, key = "", "conf.a"
			case 1:
				ex, key = "conf.fan", ""
			case 2:
				ex, key = "amq.direct", "unroutable"
			}
			if err := ch.PublishWithContext(context.Background(), ex, key, false, false, amqp091.Publishing{Body: []byte{byte(i)}}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	// amqp091-go turns multiple acks into one confirmation per tag, in
	// order; a server that acked a wrong range would show up here as a
	// missing, repeated or reordered tag.
	timeout := time.After(20 * time.Second)
	for want := uint64(1); want <= total; want++ {
		select {
		case cf := <-confirms:
			if !cf.Ack || cf.DeliveryTag != want {
				t.Fatalf("confirm %+v, want ack of %d", cf, want)
			}
		case <-timeout:
			t.Fatalf("only %d of %d confirms arrived", want-1, total)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	select {
	case cf := <-confirms:
		t.Fatalf("extra confirm %+v", cf)
	case <-time.After(50 * time.Millisecond):
	}
	a, err := ch.QueueDeclarePassive("conf.a", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ch.QueueDeclarePassive("conf.b", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Messages != 667 || b.Messages != 333 {
		t.Fatalf("queues hold %d and %d messages, want 667 and 333", a.Messages, b.Messages)
	}
}

func TestMaxMessageSize(t *testing.T) {
	const max = 1 << 20
	n := startNode(t, withServer(func(c *server.Config) { c.MaxMessageSize = max }))
	c := n.dial(t)
	other := openChannel(t, c)
	declareQueue(t, other, "sized")
	ch := openChannel(t, c)

	// Exactly the maximum is fine.
	publish(t, ch, "", "sized", amqp091.Publishing{Body: make([]byte, max)})
	if got := drainQueue(t, ch, "sized"); len(got) != 1 || len(got[0]) != max {
		t.Fatalf("message of max size not delivered whole")
	}

	closed := notifyClose(ch)
	publish(t, ch, "", "sized", amqp091.Publishing{Body: make([]byte, max+1)})
	waitClose(t, closed, amqp091.PreconditionFailed, "PRECONDITION_FAILED - message size 1048577 is larger than configured max size 1048576")

	// The connection and its other channels carry on; nothing was
	// enqueued.
	publishBody(t, other, "", "sized", "small")
	if got := drainQueue(t, other, "sized"); len(got) != 1 || got[0] != "small" {
		t.Fatalf("other channel after the oversized publish: queue holds %q", got)
	}
	again := openChannel(t, c)
	publishBody(t, again, "", "sized", "new channel")
	if got := drainQueue(t, again, "sized"); len(got) != 1 {
		t.Fatalf("new channel after the oversized publish: queue holds %q", got)
	}
}

func TestDefaultMaxMessageSize(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	declareQueue(t, ch, "big")
	closed := notifyClose(ch)
	publish(t, ch, "", "big", amqp091.Publishing{Body: make([]byte, 16<<20+1)})
	waitClose(t, closed, amqp091.PreconditionFailed, "PRECONDITION_FAILED - message size 16777217 is larger than configured max size 16777216")
	if q, err := openChannel(t, c).QueueDeclarePassive("big", false, false, false, false, nil); err != nil || q.Messages != 0 {
		t.Fatalf("queue after oversized publish: %+v, %v", q, err)
	}
}

func TestLargeAndEmptyBodies(t *testing.T) {
	n := startNode(t)
	// A small client frame_max splits even modest bodies into many frames
	// in both directions.
	small, err := amqp091.DialConfig(n.url("guest", "guest", "/"), amqp091.Config{FrameSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { small.Close() })

	for name, c := range map[string]*amqp091.Connection{"default frame_max": n.dial(t), "frame_max 4096": small} {
		t.Run(name, func(t *testing.T) {
			ch := openChannel(t, c)
			q := declareQueue(t, ch, "")
			rng := rand.New(rand.NewPCG(1, 2))
			big := make([]byte, 1<<20+17)
			for i := range big {
				big[i] = byte(rng.Uint32())
			}
			for _, body := range [][]byte{big, {}, []byte("x"), big[:131072-8], big[:131072-7]} {
				publish(t, ch, "", q.Name, amqp091.Publishing{Body: body})
				m, ok, err := ch.Get(q.Name, true)
				if err != nil || !ok {
					t.Fatalf("get: ok=%v err=%v", ok, err)
				}
				if !bytes.Equal(m.Body, body) {
					t.Fatalf("body of %d bytes came back as %d bytes, or changed", len(body), len(m.Body))
				}
			}
			// Through a consumer too.
			d, err := ch.Consume(q.Name, "", true, false, false, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			publish(t, ch, "", q.Name, amqp091.Publishing{Body: big})
			publish(t, ch, "", q.Name, amqp091.Publishing{})
			if m := receive(t, d); !bytes.Equal(m.Body, big) {
				t.Fatalf("consumed body of %d bytes, want %d", len(m.Body), len(big))
			}
			if m := receive(t, d); len(m.Body) != 0 {
				t.Fatalf("consumed empty body as %d bytes", len(m.Body))
			}
		})
	}
}

func TestPropertiesRoundTrip(t *testing.T) {
	n := startNode(t)
	ch := openChannel(t, n.dial(t))
	q := declareQueue(t, ch, "props")
	ts := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	headers := amqp091.Table{
		"bool":      true,
		"false":     false,
		"uint8":     byte(200),
		"int8":      int8(-100),
		"int16":     int16(-30000),
		"uint16":    uint16(60000),
		"int32":     int32(-2000000000),
		"uint32":    uint32(4000000000),
		"int64":     int64(-9000000000000000000),
		"float32":   float32(1.5),
		"float64":   float64(-2.25),
		"decimal":   amqp091.Decimal{Scale: 2, Value: 12345},
		"string":    "héllo",
		"empty":     "",
		"bytes":     []byte{0, 1, 2, 255},
		"timestamp": ts,
		"void":      nil,
		"array":     []any{int32(1), "two", []any{true}, amqp091.Table{"k": int64(3)}},
		"table":     amqp091.Table{"nested": amqp091.Table{"deep": "yes"}, "n": int16(7)},
		"emptytab":  amqp091.Table{},
		"emptyarr":  []any(nil), // how amqp091-go decodes an empty 'A'
	}
	pub := amqp091.Publishing{
		Headers:         headers,
		ContentType:     "application/json",
		ContentEncoding: "gzip",
		DeliveryMode:    amqp091.Persistent,
		Priority:        7,
		CorrelationId:   "corr",
		ReplyTo:         "reply.queue",
		Expiration:      "60000",
		MessageId:       "msg-1",
		Timestamp:       ts,
		Type:            "kind",
		UserId:          "guest",
		AppId:           "app",
		Body:            []byte("{}"),
	}
	publish(t, ch, "", q.Name, pub)
	check := func(how string, m amqp091.Delivery) {
		t.Helper()
		got := amqp091.Publishing{
			Headers: m.Headers, ContentType: m.ContentType, ContentEncoding: m.ContentEncoding,
			DeliveryMode: m.DeliveryMode, Priority: m.Priority, CorrelationId: m.CorrelationId,
			ReplyTo: m.ReplyTo, Expiration: m.Expiration, MessageId: m.MessageId, Timestamp: m.Timestamp,
			Type: m.Type, UserId: m.UserId, AppId: m.AppId, Body: m.Body,
		}
		for k, want := range headers {
			g, ok := got.Headers[k]
			if gt, isTime := g.(time.Time); isTime {
				g = gt.UTC() // amqp091-go decodes timestamps in local time
			}
			if !ok || !reflect.DeepEqual(g, want) {
				t.Errorf("%s: header %q = %#v (present %v), want %#v", how, k, g, ok, want)
			}
		}
		if len(got.Headers) != len(headers) {
			t.Errorf("%s: %d headers, want %d", how, len(got.Headers), len(headers))
		}
		got.Headers, got.Timestamp = nil, got.Timestamp.UTC()
		want := pub
		want.Headers = nil
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: properties\n got %+v\nwant %+v", how, got, want)
		}
	}
	m, ok, err := ch.Get(q.Name, true)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	check("basic.get", m)

	publish(t, ch, "", q.Name, pub)
	d, err := ch.Consume(q.Name, "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	check("basic.deliver", receive(t, d))

	// No properties at all stay absent.
	publish(t, ch, "", q.Name, amqp091.Publishing{Body: []byte("bare")})
	m = receive(t, d)
	if m.Headers != nil || m.ContentType != "" || m.DeliveryMode != 0 || m.Priority != 0 || !m.Timestamp.IsZero() || m.UserId != "" {
		t.Fatalf("bare message came back with properties: %+v", m)
	}
}

func TestPublishUserIDMustMatch(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	q := declareQueue(t, ch, "uid")
	closed := notifyClose(ch)
	publish(t, ch, "", q.Name, amqp091.Publishing{UserId: "mallory", Body: []byte("x")})
	waitClose(t, closed, amqp091.PreconditionFailed, "PRECONDITION_FAILED - user_id property set to 'mallory' but authenticated user was 'guest'")
	if got := drainQueue(t, openChannel(t, c), q.Name); len(got) != 0 {
		t.Fatalf("message with a forged user-id was enqueued: %q", got)
	}
}
