package server_test

import (
	"context"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// TestRevokedPermissionRefusesTheNextPublish: a channel that has published
// keeps no stale permission once the user's permissions are cleared; its
// next publish is refused with 403, as every other operation is.
func TestRevokedPermissionRefusesTheNextPublish(t *testing.T) {
	tn := startNode(t)
	c := tn.dial(t)
	ch := openChannel(t, c)
	closed := notifyClose(ch)
	declareQueue(t, ch, "revoked")
	if err := ch.PublishWithContext(context.Background(), "", "revoked", false, false, amqp091.Publishing{Body: []byte("before")}); err != nil {
		t.Fatal(err)
	}
	if err := tn.Broker().ClearPermissions("guest", "/"); err != nil {
		t.Fatal(err)
	}
	if err := ch.PublishWithContext(context.Background(), "", "revoked", false, false, amqp091.Publishing{Body: []byte("after")}); err != nil {
		t.Fatal(err)
	}
	waitClose(t, closed, amqp091.AccessRefused, "ACCESS_REFUSED - write access to exchange 'amq.default' in vhost '/' refused for user 'guest'")
}
