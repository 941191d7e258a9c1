package server_test

import (
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/broker"
)

var (
	quorumArgs  = amqp091.Table{"x-queue-type": "quorum"}
	classicArgs = amqp091.Table{"x-queue-type": "classic"}
)

func TestQuorumQueueDeclare(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	if _, err := ch.QueueDeclare("qq", true, false, false, false, quorumArgs); err != nil {
		t.Fatalf("declare durable quorum queue: %v", err)
	}
	publishBody(t, ch, "", "qq", "hello")
	if got := drainQueue(t, ch, "qq"); len(got) != 1 || got[0] != "hello" {
		t.Fatalf("quorum queue holds %q", got)
	}
	// Unknown x- arguments are accepted.
	args := amqp091.Table{"x-queue-type": "quorum", "x-whatever": int32(7), "x-delivery-limit": int32(5)}
	if _, err := ch.QueueDeclare("qq.args", true, false, false, false, args); err != nil {
		t.Fatalf("declare with an unknown argument: %v", err)
	}

	const pre = "PRECONDITION_FAILED - "
	cases := []struct {
		name                           string
		queue                          string
		durable, autoDelete, exclusive bool
		args                           amqp091.Table
		text                           string
	}{
		{"exclusive", "qq.x", true, false, true, quorumArgs, pre + "invalid property 'exclusive-owner' for queue 'qq.x' in vhost '/'"},
		{"auto-delete", "qq.x", true, true, false, quorumArgs, pre + "invalid property 'auto-delete' for queue 'qq.x' in vhost '/'"},
		{"non-durable", "qq.x", false, false, false, quorumArgs, pre + "invalid property 'non-durable' for queue 'qq.x' in vhost '/'"},
		{"server-named", "", true, false, false, quorumArgs, pre + "Cannot declare a server-named queue for type rabbit_quorum_queue"},
		{"server-named by default type", "", true, false, false, nil, pre + "Cannot declare a server-named queue for type rabbit_quorum_queue"},
		{"x-max-priority", "qq.x", true, false, false, amqp091.Table{"x-queue-type": "quorum", "x-max-priority": int32(5)},
			pre + "invalid arg 'x-max-priority' for queue 'qq.x' in vhost '/' of queue type rabbit_quorum_queue"},
		{"x-max-priority by default type", "qq.x", true, false, false, amqp091.Table{"x-max-priority": int32(5)},
			pre + "invalid arg 'x-max-priority' for queue 'qq.x' in vhost '/' of queue type rabbit_quorum_queue"},
		{"unknown type", "qq.x", true, false, false, amqp091.Table{"x-queue-type": "nonsense"},
			pre + "invalid arg 'x-queue-type' for queue 'qq.x' in vhost '/': \"unsupported queue type 'nonsense'\""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := openChannel(t, c).QueueDeclare(tc.queue, tc.durable, tc.autoDelete, tc.exclusive, false, tc.args)
			wantError(t, err, amqp091.PreconditionFailed, tc.text)
		})
	}
	if queueExists(t, c, "qq.x") {
		t.Fatal("a refused declaration created the queue")
	}
}

func TestDefaultQueueType(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)

	// A durable queue without x-queue-type is a quorum queue.
	if _, err := ch.QueueDeclare("dq", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("dq", true, false, false, false, quorumArgs); err != nil {
		t.Fatalf("redeclare as quorum: %v", err)
	}
	if _, err := ch.QueueDeclare("dq", true, false, false, false, nil); err != nil {
		t.Fatalf("redeclare without x-queue-type: %v", err)
	}
	_, err := openChannel(t, c).QueueDeclare("dq", true, false, false, false, classicArgs)
	wantError(t, err, amqp091.PreconditionFailed,
		"PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'dq' in vhost '/': received 'classic' but current is 'quorum'")

	// Transient, exclusive and auto-delete queues without x-queue-type
	// are classic.
	type decl struct{ durable, autoDelete, exclusive bool }
	for name, d := range map[string]decl{
		"cq.transient":  {false, false, false},
		"cq.exclusive":  {true, false, true},
		"cq.autodelete": {true, true, false},
	} {
		q, err := ch.QueueDeclare(name, d.durable, d.autoDelete, d.exclusive, false, nil)
		if err != nil {
			t.Fatalf("declare %q %+v: %v", name, d, err)
		}
		if _, err := ch.QueueDeclare(q.Name, d.durable, d.autoDelete, d.exclusive, false, classicArgs); err != nil {
			t.Fatalf("redeclare %q as classic: %v", q.Name, err)
		}
		_, err = openChannel(t, c).QueueDeclare(q.Name, d.durable, d.autoDelete, d.exclusive, false, quorumArgs)
		wantError(t, err, amqp091.PreconditionFailed,
			"PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue '"+q.Name+"' in vhost '/': received 'quorum' but current is 'classic'")
	}

	// So is a transient server-named one. Its amq.gen- name cannot be
	// redeclared (reserved prefix), so ask the broker.
	q, err := ch.QueueDeclare("", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := n.Broker().OpenVhost(&broker.User{Name: "guest"}, "/")
	if err != nil {
		t.Fatal(err)
	}
	bq, err := v.LookupQueue(nil, 0, q.Name, broker.Read)
	if err != nil {
		t.Fatal(err)
	}
	if bq.Type() != broker.QueueTypeClassic {
		t.Fatalf("server-named transient queue is %s, want classic", bq.Type())
	}

	// An explicitly classic durable queue stays classic.
	if _, err := ch.QueueDeclare("cq.durable", true, false, false, false, classicArgs); err != nil {
		t.Fatal(err)
	}
	_, err = openChannel(t, c).QueueDeclare("cq.durable", true, false, false, false, quorumArgs)
	wantCode(t, err, amqp091.PreconditionFailed)
	// x-max-priority is fine on classic queues.
	if _, err := ch.QueueDeclare("cq.prio", true, false, false, false, amqp091.Table{"x-queue-type": "classic", "x-max-priority": int32(5)}); err != nil {
		t.Fatalf("classic queue with x-max-priority: %v", err)
	}
}

// TestClassicQueueVersion: x-queue-version 2 is accepted on a classic
// queue, anything else refused with RabbitMQ 4.3's 406 texts (version 1
// storage was removed in 4.3; rabbit_amqqueue:check_queue_version).
func TestClassicQueueVersion(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	if _, err := ch.QueueDeclare("cq.v2", true, false, false, false, amqp091.Table{"x-queue-type": "classic", "x-queue-version": int32(2)}); err != nil {
		t.Fatalf("classic queue with x-queue-version 2: %v", err)
	}
	const pre = "PRECONDITION_FAILED - invalid arg 'x-queue-version' for queue 'cq.v' in vhost '/': "
	for _, tc := range []struct {
		version any
		text    string
	}{
		{int32(1), pre + `"unsupported queue version '1'"`},
		{int64(3), pre + `"unsupported queue version '3'"`},
		{int32(-1), pre + "{value_negative,-1}"},
		{"2", pre + "{unacceptable_type,longstr}"},
	} {
		_, err := openChannel(t, c).QueueDeclare("cq.v", true, false, false, false, amqp091.Table{"x-queue-type": "classic", "x-queue-version": tc.version})
		wantError(t, err, amqp091.PreconditionFailed, tc.text)
	}
	if queueExists(t, c, "cq.v") {
		t.Fatal("a refused declaration created the queue")
	}
}

func TestQuorumQueueDeleteConditionalIsConnectionError(t *testing.T) {
	n := startNode(t)
	for _, tc := range []struct {
		name              string
		ifUnused, ifEmpty bool
		flag              string
	}{
		{"if-unused", true, false, "if-unused"},
		{"if-empty", false, true, "if-empty"},
		{"both", true, true, "if-unused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := n.dial(t)
			ch := openChannel(t, c)
			if _, err := ch.QueueDeclare("qq.del", true, false, false, false, quorumArgs); err != nil {
				t.Fatal(err)
			}
			connClosed := c.NotifyClose(make(chan *amqp091.Error, 1))
			_, err := ch.QueueDelete("qq.del", tc.ifUnused, tc.ifEmpty, false)
			want := "NOT_IMPLEMENTED - cannot delete queue 'qq.del' in vhost '/'. queue.delete operations with " + tc.flag + " flag set are not supported by quorum queues"
			wantError(t, err, amqp091.NotImplemented, want)
			waitClose(t, connClosed, amqp091.NotImplemented, want)
			if !c.IsClosed() {
				t.Fatal("connection still open after 540")
			}
			// The queue is still there.
			other := openChannel(t, n.dial(t))
			if _, err := other.QueueDeclarePassive("qq.del", true, false, false, false, nil); err != nil {
				t.Fatalf("queue gone after refused delete: %v", err)
			}
			if _, err := other.QueueDelete("qq.del", false, false, false); err != nil {
				t.Fatalf("unconditional delete: %v", err)
			}
		})
	}
}
