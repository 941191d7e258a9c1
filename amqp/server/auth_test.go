package server_test

import (
	"errors"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/cluster/catalog"
)

// limitedSeed is guest as usual plus "limited", who may configure, write
// and read only resources named lim.*, and "hashed", whose password is
// given as a RabbitMQ hash, with a vhost of its own.
func limitedSeed() broker.Seed {
	s := broker.DefaultSeed()
	s.Users = append(s.Users,
		broker.SeedUser{Name: "limited", Password: "secret"},
		broker.SeedUser{Name: "hashed", PasswordHash: broker.HashPassword("s3cret")},
	)
	s.Vhosts = append(s.Vhosts, "other")
	s.Permissions = append(s.Permissions,
		catalog.Permission{User: "limited", Vhost: "/", Configure: `^lim\.`, Write: `^lim\.`, Read: `^lim\.`},
		catalog.Permission{User: "hashed", Vhost: "other", Configure: ".*", Write: ".*", Read: ".*"},
	)
	return s
}

func TestLoginRefused(t *testing.T) {
	n := startNode(t, withSeed(limitedSeed()))
	// amqp091-go does not announce authentication_failure_close, so the
	// server hangs up without a close frame and the client reports
	// ErrCredentials (403).
	for _, tc := range []struct{ user, pass string }{
		{"guest", "wrong"},
		{"nobody", "guest"},
		{"limited", ""},
		{"hashed", "S3cret"},
	} {
		c, err := amqp091.Dial(n.url(tc.user, tc.pass, "/"))
		if err == nil {
			c.Close()
			t.Fatalf("%s/%s: login accepted", tc.user, tc.pass)
		}
		if !errors.Is(err, amqp091.ErrCredentials) {
			t.Fatalf("%s/%s: got %v, want ErrCredentials", tc.user, tc.pass, err)
		}
	}
	// The right passwords work, hashed or plain.
	n.dialAs(t, "limited", "secret", "/")
	n.dialAs(t, "hashed", "s3cret", "other")
}

func TestVhostAccess(t *testing.T) {
	n := startNode(t, withSeed(limitedSeed()))
	for _, tc := range []struct{ user, pass, vhost string }{
		{"guest", "guest", "nope"},
		{"guest", "guest", "other"}, // exists, but guest has no permissions there
		{"hashed", "s3cret", "/"},
	} {
		c, err := amqp091.Dial(n.url(tc.user, tc.pass, tc.vhost))
		if err == nil {
			c.Close()
			t.Fatalf("%s opened vhost %q", tc.user, tc.vhost)
		}
		wantError(t, err, amqp091.NotAllowed, "NOT_ALLOWED - access to vhost '"+tc.vhost+"' refused for user '"+tc.user+"'")
	}
}

func TestPermissions(t *testing.T) {
	n := startNode(t, withSeed(limitedSeed()))
	admin := openChannel(t, n.dial(t))
	declareQueue(t, admin, "other.q")
	publishBody(t, admin, "", "other.q", "x")
	if err := admin.ExchangeDeclare("other.x", "fanout", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}

	c := n.dialAs(t, "limited", "secret", "/")
	ch := openChannel(t, c)
	// What the patterns allow works.
	declareQueue(t, ch, "lim.q")
	if err := ch.ExchangeDeclare("lim.x", "direct", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind("lim.q", "k", "lim.x", false, nil); err != nil {
		t.Fatal(err)
	}
	publishBody(t, ch, "lim.x", "k", "mine")
	if got := drainQueue(t, ch, "lim.q"); len(got) != 1 || got[0] != "mine" {
		t.Fatalf("lim.q holds %q", got)
	}

	refused := func(perm, kind, name string) string {
		return "ACCESS_REFUSED - " + perm + " access to " + kind + " '" + name + "' in vhost '/' refused for user 'limited'"
	}
	cases := []struct {
		name string
		op   func(*amqp091.Channel) error
		text string
	}{
		{"declare queue", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclare("other.new", false, false, false, false, nil)
			return err
		},
			refused("configure", "queue", "other.new")},
		{"redeclare existing queue", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclare("other.q", false, false, false, false, nil)
			return err
		},
			refused("configure", "queue", "other.q")},
		{"passive declare queue", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclarePassive("other.q", false, false, false, false, nil)
			return err
		}, refused("configure", "queue", "other.q")},
		{"passive declare missing queue", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclarePassive("other.none", false, false, false, false, nil)
			return err
		}, refused("configure", "queue", "other.none")},
		{"declare exchange", func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("other.new", "direct", false, false, false, false, nil)
		}, refused("configure", "exchange", "other.new")},
		{"passive declare exchange", func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclarePassive("amq.direct", "direct", true, false, false, false, nil)
		}, refused("configure", "exchange", "amq.direct")},
		{"delete exchange", func(ch *amqp091.Channel) error { return ch.ExchangeDelete("other.x", false, false) },
			refused("configure", "exchange", "other.x")},
		{"delete queue", func(ch *amqp091.Channel) error { _, err := ch.QueueDelete("other.q", false, false, false); return err },
			refused("configure", "queue", "other.q")},
		{"delete missing queue", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDelete("other.none", false, false, false)
			return err
		},
			refused("configure", "queue", "other.none")},
		{"consume", func(ch *amqp091.Channel) error {
			_, err := ch.Consume("other.q", "", false, false, false, false, nil)
			return err
		},
			refused("read", "queue", "other.q")},
		{"consume missing queue", func(ch *amqp091.Channel) error {
			_, err := ch.Consume("other.none", "", false, false, false, false, nil)
			return err
		},
			refused("read", "queue", "other.none")},
		{"get", func(ch *amqp091.Channel) error { _, _, err := ch.Get("other.q", false); return err },
			refused("read", "queue", "other.q")},
		{"purge", func(ch *amqp091.Channel) error { _, err := ch.QueuePurge("other.q", false); return err },
			refused("read", "queue", "other.q")},
		{"bind: write on queue", func(ch *amqp091.Channel) error { return ch.QueueBind("other.q", "k", "lim.x", false, nil) },
			refused("write", "queue", "other.q")},
		{"bind: read on exchange", func(ch *amqp091.Channel) error { return ch.QueueBind("lim.q", "k", "amq.direct", false, nil) },
			refused("read", "exchange", "amq.direct")},
		{"unbind: read on exchange", func(ch *amqp091.Channel) error { return ch.QueueUnbind("lim.q", "k", "other.x", nil) },
			refused("read", "exchange", "other.x")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, tc.op(openChannel(t, c)), amqp091.AccessRefused, tc.text)
		})
	}
	for _, x := range []struct{ exchange, name string }{{"amq.direct", "amq.direct"}, {"", "amq.default"}, {"other.x", "other.x"}} {
		t.Run("publish to "+x.name, func(t *testing.T) {
			ch := openChannel(t, c)
			closed := notifyClose(ch)
			publishBody(t, ch, x.exchange, "other.q", "forbidden")
			waitClose(t, closed, amqp091.AccessRefused, refused("write", "exchange", x.name))
		})
	}
	// Nothing the refused operations tried happened.
	if got := drainQueue(t, admin, "other.q"); len(got) != 1 || got[0] != "x" {
		t.Fatalf("other.q holds %q, want only its original message", got)
	}
	if !exchangeExists(t, n.dial(t), "other.x") {
		t.Fatal("refused exchange delete deleted it")
	}
}
