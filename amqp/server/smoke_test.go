package server_test

import (
	"context"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

func TestPublishConfirmConsumeAck(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	q, err := ch.QueueDeclare("smoke", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 10))
	for i := 0; i < 3; i++ {
		if err := ch.PublishWithContext(context.Background(), "", q.Name, false, false, amqp091.Publishing{Body: []byte{byte('a' + i)}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 3; i++ {
		cf := <-confirms
		if !cf.Ack || cf.DeliveryTag != uint64(i) {
			t.Fatalf("confirm %d = %+v", i, cf)
		}
	}
	d, err := ch.Consume(q.Name, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		m := receive(t, d)
		if string(m.Body) != string(rune('a'+i)) {
			t.Fatalf("message %d = %q", i, m.Body)
		}
		if err := m.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
}
