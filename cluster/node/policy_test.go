package node_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/cluster/node"
	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/proto/adminpb"
	"github.com/warrenmq/warren/raftq/testwait"
)

// confirms publishes n messages to queue q with confirms and returns
// whether each was acked.
func confirms(t *testing.T, ch *amqp091.Channel, q string, n int) []bool {
	t.Helper()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	var out []bool
	for i := 0; i < n; i++ {
		dc, err := ch.PublishWithDeferredConfirm("", q, false, false, amqp091.Publishing{Body: []byte("m")})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		ok, err := dc.WaitContext(ctx)
		cancel()
		if err != nil {
			t.Fatalf("confirm of message %d to %s: %v", i+1, q, err)
		}
		out = append(out, ok)
	}
	return out
}

func acks(got []bool, want int) bool {
	for i, ok := range got {
		if ok != (i < want) {
			return false
		}
	}
	return true
}

func startStandalone(t *testing.T) *node.Node {
	t.Helper()
	var out io.Writer = io.Discard
	if os.Getenv("WARREN_TEST_LOG") != "" {
		out = os.Stderr
	}
	n, err := node.Start(node.Config{
		DataDir: t.TempDir(), AMQPAddr: "127.0.0.1:0",
		Log:    slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Broker: broker.Config{Seed: broker.DefaultSeed()},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Close(ctx)
	})
	return n
}

func dialNode(t *testing.T, n *node.Node) *amqp091.Channel {
	t.Helper()
	c, err := amqp091.Dial("amqp://guest:guest@" + n.AMQPAddr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func def(t *testing.T, s string) map[string]any {
	t.Helper()
	d, err := broker.DefinitionFromJSON(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestPoliciesStandalone: a policy limits the quorum queues it matches;
// with an x-max-length argument as well the lower applies (RabbitMQ's
// rabbit_quorum_queue takes the minimum); an operator policy's lower
// limit beats both.
func TestPoliciesStandalone(t *testing.T) {
	t.Parallel()
	n := startStandalone(t)
	b := n.Broker()
	if err := b.SetPolicy(broker.PolicyDef{Vhost: "/", Name: "lim", Pattern: `^lim\.`, ApplyTo: "quorum_queues",
		Definition: def(t, `{"max-length":2,"overflow":"reject-publish"}`)}); err != nil {
		t.Fatal(err)
	}
	ch := dialNode(t, n)
	declare := func(name string, args amqp091.Table) {
		t.Helper()
		args["x-queue-type"] = "quorum"
		if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
			t.Fatal(err)
		}
	}
	declare("lim.a", amqp091.Table{})
	if got := confirms(t, ch, "lim.a", 3); !acks(got, 2) {
		t.Errorf("lim.a: confirms %v, want 2 acks then a nack", got)
	}
	declare("lim.b", amqp091.Table{"x-max-length": int32(5)})
	if got := confirms(t, ch, "lim.b", 3); !acks(got, 2) {
		t.Errorf("lim.b (x-max-length 5, policy 2): confirms %v, want the lower, 2", got)
	}
	declare("lim.c", amqp091.Table{"x-max-length": int32(1)})
	if got := confirms(t, ch, "lim.c", 2); !acks(got, 1) {
		t.Errorf("lim.c (x-max-length 1, policy 2): confirms %v, want the lower, 1", got)
	}
	if err := b.SetPolicy(broker.PolicyDef{Vhost: "/", Name: "cap", Operator: true, Pattern: `^lim\.op`, ApplyTo: "queues",
		Definition: def(t, `{"max-length":1}`)}); err != nil {
		t.Fatal(err)
	}
	declare("lim.op", amqp091.Table{"x-max-length": int32(5)})
	if got := confirms(t, ch, "lim.op", 2); !acks(got, 1) {
		t.Errorf("lim.op (operator policy 1): confirms %v", got)
	}
	// Unmatched queues are not limited.
	declare("free", amqp091.Table{})
	if got := confirms(t, ch, "free", 3); !acks(got, 3) {
		t.Errorf("free: confirms %v", got)
	}

	// Changing the policy changes existing queues' limits.
	if err := b.SetPolicy(broker.PolicyDef{Vhost: "/", Name: "lim", Pattern: `^(lim\.|free)`, ApplyTo: "quorum_queues",
		Definition: def(t, `{"max-length":3,"overflow":"reject-publish"}`)}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "free to refuse its fourth message", func() bool {
		return !confirms(t, ch, "free", 1)[0]
	})
	if got := confirms(t, ch, "lim.a", 1); !acks(got, 1) {
		t.Errorf("lim.a after raising its limit to 3: confirms %v", got)
	}
}

func adminClient(t *testing.T, m *nodetest.Member) adminpb.AdminClient {
	t.Helper()
	conn, err := grpc.NewClient(m.InternalAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return adminpb.NewAdminClient(conn)
}

func setPolicy(t *testing.T, c adminpb.AdminClient, p *adminpb.Policy) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.SetPolicy(ctx, &adminpb.SetPolicyRequest{Policy: p}); err != nil {
		t.Fatalf("set policy %s: %v", p.Name, err)
	}
}

// waitPolicy waits until every node has the named policy.
func waitPolicy(t *testing.T, ms []*nodetest.Member, name string, operator bool) {
	t.Helper()
	testwait.For(t, 10*time.Second, "policy "+name+" on every node", func() bool {
		for _, m := range ms {
			found := false
			for _, p := range m.Broker().Policies("/", operator) {
				found = found || p.Name == name
			}
			if !found {
				return false
			}
		}
		return true
	})
}

// TestPoliciesInCluster: policies set through one node's admin service
// apply to quorum queues declared on another and published to from a
// third; an operator policy's lower limit wins; a queue-leader-locator
// policy puts leaders on the declaring node.
func TestPoliciesInCluster(t *testing.T) {
	t.Parallel()
	ms := nodetest.StartCluster(t, 3)
	admin1, admin2 := adminClient(t, ms[1]), adminClient(t, ms[2])
	setPolicy(t, admin1, &adminpb.Policy{Name: "lim", Pattern: `^cap\.`, ApplyTo: "quorum_queues",
		Definition: `{"max-length":2,"overflow":"reject-publish"}`})
	setPolicy(t, admin2, &adminpb.Policy{Name: "cap", Pattern: `^cap\.op`, ApplyTo: "queues", Operator: true,
		Definition: `{"max-length":1}`})
	setPolicy(t, admin2, &adminpb.Policy{Name: "local", Pattern: `^local\.`, Definition: `{"queue-leader-locator":"client-local"}`, Priority: 1})
	waitPolicy(t, ms, "lim", false)
	waitPolicy(t, ms, "cap", true)
	waitPolicy(t, ms, "local", false)

	decl, pub := ms[0].Channel(), ms[2].Channel()
	for _, q := range []struct {
		name string
		args amqp091.Table
	}{
		{"cap.a", amqp091.Table{"x-queue-type": "quorum"}},
		{"cap.b", amqp091.Table{"x-queue-type": "quorum", "x-max-length": int32(5)}},
		{"cap.op", amqp091.Table{"x-queue-type": "quorum", "x-max-length": int32(5)}},
	} {
		if _, err := decl.QueueDeclare(q.name, true, false, false, false, q.args); err != nil {
			t.Fatal(err)
		}
	}
	// The publishing node routes from its own copy of the metadata, which
	// may apply the declarations a moment after the declaring node: a
	// publish to a queue it does not know yet is unroutable, and confirmed.
	testwait.For(t, 10*time.Second, "the queues known on the publishing node", func() bool {
		for _, name := range []string{"cap.a", "cap.b", "cap.op"} {
			if _, ok := ms[2].Broker().QueueRecord("/", name); !ok {
				return false
			}
		}
		return true
	})
	if got := confirms(t, pub, "cap.a", 3); !acks(got, 2) {
		t.Errorf("cap.a: confirms %v, want 2 acks then a nack", got)
	}
	if got := confirms(t, pub, "cap.b", 3); !acks(got, 2) {
		t.Errorf("cap.b (x-max-length 5, policy 2): confirms %v, want the lower, 2", got)
	}
	if got := confirms(t, pub, "cap.op", 2); !acks(got, 1) {
		t.Errorf("cap.op (operator policy 1): confirms %v", got)
	}

	local := ms[2].Channel()
	for _, name := range []string{"local.1", "local.2", "local.3"} {
		if _, err := local.QueueDeclare(name, true, false, false, false, amqp091.Table{"x-queue-type": "quorum", "x-queue-leader-locator": "balanced"}); err != nil {
			t.Fatal(err)
		}
		// The policy's locator beats the argument (rabbit_queue_location:
		// leader_locator/1 resolves to the policy's value).
		rec, ok := ms[2].Broker().QueueRecord("/", name)
		if !ok || rec.Leader != ms[2].Name() {
			t.Errorf("%s: first leader %q, want the declaring node %s", name, rec.Leader, ms[2].Name())
		}
	}

	// Raising the limit of existing queues: cap.a takes a third message.
	setPolicy(t, admin1, &adminpb.Policy{Name: "lim", Pattern: `^cap\.`, ApplyTo: "quorum_queues",
		Definition: `{"max-length":3,"overflow":"reject-publish"}`})
	testwait.For(t, 15*time.Second, "cap.a to take a third message", func() bool {
		return confirms(t, pub, "cap.a", 1)[0]
	})
	if got := confirms(t, pub, "cap.a", 1); !acks(got, 0) {
		t.Errorf("cap.a beyond 3: confirms %v", got)
	}
	// Clearing the operator policy: cap.op goes back to min(policy 3, argument 5).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := admin1.ClearPolicy(ctx, &adminpb.ClearPolicyRequest{Name: "cap", Operator: true}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 15*time.Second, "cap.op to take a second message", func() bool {
		return confirms(t, pub, "cap.op", 1)[0]
	})
}
