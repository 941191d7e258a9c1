package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/raftq/testwait"
)

// The end-to-end tests run this test binary itself as the server, in a
// child process configured through WARREN_* variables, so that they can
// kill -9 a real process without building anything first.
func TestMain(m *testing.M) {
	if os.Getenv("WARREN_TEST_RUN_SERVER") == "1" {
		os.Exit(run(nil))
	}
	os.Exit(m.Run())
}

type serverProcess struct {
	t       *testing.T
	dataDir string
	addr    string
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the process has exited
	waitErr error
}

// freeAddr is a loopback port below the kernel's ephemeral range, free
// for TCP and UDP (nodetest.FreeAddr).
func freeAddr(t *testing.T) string { return nodetest.FreeAddr(t) }

// startServer starts the server on dataDir and addr, with the WARREN_*
// settings of env besides.
func startServer(t *testing.T, dataDir, addr string, env ...string) *serverProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		"WARREN_TEST_RUN_SERVER=1",
		"WARREN_DATA_DIR="+dataDir,
		"WARREN_AMQP="+addr,
		"WARREN_LOG_LEVEL=warn",
	)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serverProcess{t: t, dataDir: dataDir, addr: addr, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.exited
	})
	testwait.ForNil(t, 20*time.Second, "the server to listen on "+addr, func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-p.exited:
			t.Fatalf("server exited during start: %v", p.waitErr)
		default:
		}
		return err
	})
	return p
}

func (p *serverProcess) dial() *amqp091.Connection {
	p.t.Helper()
	c, err := amqp091.Dial(fmt.Sprintf("amqp://guest:guest@%s/", p.addr))
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { c.Close() })
	return c
}

func code(err error) int {
	if e, ok := err.(*amqp091.Error); ok {
		return e.Code
	}
	return 0
}

// TestDefinitionsSurviveKill9 declares durable and transient entities,
// kills the server with SIGKILL, restarts it on the same data and checks
// that exactly the durable ones came back, bindings included.
func TestDefinitionsSurviveKill9(t *testing.T) {
	dataDir, addr := t.TempDir(), freeAddr(t)
	p := startServer(t, dataDir, addr)
	ch, err := p.dial().Channel()
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(ch.ExchangeDeclare("orders", "topic", true, false, false, false, nil))
	must(ch.ExchangeDeclare("scratch", "fanout", false, false, false, false, nil))
	_, err = ch.QueueDeclare("durable-classic", true, false, false, false, amqp091.Table{"x-queue-type": "classic"})
	must(err)
	_, err = ch.QueueDeclare("durable-quorum", true, false, false, false, nil)
	must(err)
	_, err = ch.QueueDeclare("transient", false, false, false, false, nil)
	must(err)
	must(ch.QueueBind("durable-classic", "eu.#", "orders", false, nil))
	must(ch.QueueBind("durable-quorum", "*.paid", "orders", false, nil))

	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.exited

	p = startServer(t, dataDir, addr)
	c := p.dial()
	ch, err = c.Channel()
	must(err)
	must(ch.ExchangeDeclarePassive("orders", "topic", true, false, false, false, nil))
	if err := ch.ExchangeDeclare("orders", "direct", true, false, false, false, nil); code(err) != 406 {
		t.Fatalf("orders came back with another type: redeclare as direct gave %v", err)
	}
	ch, _ = c.Channel()
	if err := ch.ExchangeDeclarePassive("scratch", "fanout", false, false, false, false, nil); code(err) != 404 {
		t.Fatalf("transient exchange survived: %v", err)
	}
	ch, _ = c.Channel()
	if _, err := ch.QueueDeclarePassive("transient", false, false, false, false, nil); code(err) != 404 {
		t.Fatalf("transient queue survived: %v", err)
	}
	ch, _ = c.Channel()
	// Redeclaring with the recorded type succeeds; with the other fails.
	_, err = ch.QueueDeclare("durable-quorum", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"})
	must(err)
	_, err = ch.QueueDeclare("durable-classic", true, false, false, false, amqp091.Table{"x-queue-type": "classic"})
	must(err)

	// The bindings route again.
	must(ch.Confirm(false))
	returns := ch.NotifyReturn(make(chan amqp091.Return, 4))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 4))
	for _, key := range []string{"eu.paid", "us.paid", "nowhere"} {
		must(ch.PublishWithContext(context.Background(), "orders", key, true, false, amqp091.Publishing{Body: []byte(key)}))
		if cf := <-confirms; !cf.Ack {
			t.Fatalf("publish %s nacked", key)
		}
	}
	for q, want := range map[string]int{"durable-classic": 1, "durable-quorum": 2} {
		info, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
		must(err)
		if info.Messages != want {
			t.Errorf("%s holds %d messages after routing, want %d", q, info.Messages, want)
		}
	}
	select {
	case r := <-returns:
		if r.RoutingKey != "nowhere" {
			t.Fatalf("unexpected return for %q", r.RoutingKey)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the unroutable publish was not returned")
	}
}

// TestGracefulStop checks that SIGTERM and SIGINT close clients with
// CONNECTION_FORCED and exit 0. (SIGHUP reloads TLS material and keeps
// the node running: TestCertificateRotationUnderTraffic.)
func TestGracefulStop(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			p := startServer(t, t.TempDir(), freeAddr(t))
			c := p.dial()
			closed := c.NotifyClose(make(chan *amqp091.Error, 1))
			if err := p.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case e := <-closed:
				if e == nil || e.Code != amqp091.ConnectionForced {
					t.Fatalf("client saw %v, want 320 CONNECTION_FORCED", e)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("connection not closed on %v", sig)
			}
			select {
			case <-p.exited:
				if p.waitErr != nil {
					t.Fatalf("server exit: %v", p.waitErr)
				}
			case <-time.After(15 * time.Second):
				t.Fatalf("server did not exit on %v", sig)
			}
		})
	}
}

// TestQuorumQueueSurvivesKill9 publishes with confirms to a quorum queue,
// acks part of it, kills the server with SIGKILL, and checks after the
// restart that every confirmed, unacked message is there exactly once and
// no acked one came back.
func TestQuorumQueueSurvivesKill9(t *testing.T) { testQueueSurvivesKill9(t, "quorum") }

// TestDurableClassicQueueSurvivesKill9 is the same for a durable classic
// queue and persistent messages.
func TestDurableClassicQueueSurvivesKill9(t *testing.T) { testQueueSurvivesKill9(t, "classic") }

func testQueueSurvivesKill9(t *testing.T, queueType string) {
	dataDir, addr := t.TempDir(), freeAddr(t)
	p := startServer(t, dataDir, addr)
	ch, err := p.dial().Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("orders", true, false, false, false, amqp091.Table{"x-queue-type": queueType}); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	const total, acked = 500, 200
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, total))
	for i := 0; i < total; i++ {
		body := []byte(fmt.Sprintf("m%04d", i))
		if err := ch.PublishWithContext(context.Background(), "", "orders", false, false, amqp091.Publishing{Body: body, DeliveryMode: 2}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < total; i++ {
		select {
		case c := <-confirms:
			if !c.Ack {
				t.Fatalf("publish %d nacked", c.DeliveryTag)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d confirms", i)
		}
	}
	// Consume and ack the first 200. Acks are not waited for (as in
	// RabbitMQ), so close the channel and wait until the queue shows them:
	// 300 ready once the acks and the channel's returns are applied.
	consumeN := func(ch *amqp091.Channel, n int, ack bool) []string {
		t.Helper()
		if err := ch.Qos(n, 0, false); err != nil {
			t.Fatal(err)
		}
		deliveries, err := ch.Consume("orders", "", false, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		var bodies []string
		for len(bodies) < n {
			select {
			case d := <-deliveries:
				bodies = append(bodies, string(d.Body))
				if ack {
					if err := d.Ack(false); err != nil {
						t.Fatal(err)
					}
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("only %d of %d deliveries", len(bodies), n)
			}
		}
		return bodies
	}
	gone := map[string]bool{}
	for _, b := range consumeN(ch, acked, true) {
		gone[b] = true
	}
	ch.Close()
	probe, err := p.dial().Channel()
	if err != nil {
		t.Fatal(err)
	}
	waitReady := func(want int) {
		t.Helper()
		testwait.ForNil(t, 10*time.Second, fmt.Sprintf("%d ready", want), func() error {
			q, err := probe.QueueDeclarePassive("orders", true, false, false, false, amqp091.Table{"x-queue-type": queueType})
			if err != nil {
				t.Fatal(err)
			}
			if q.Messages != want {
				return fmt.Errorf("the queue shows %d", q.Messages)
			}
			return nil
		})
	}
	waitReady(total - acked)
	// Hold 50 unacked on a live consumer when the kill comes.
	holder, err := p.dial().Channel()
	if err != nil {
		t.Fatal(err)
	}
	consumeN(holder, 50, false)
	waitReady(total - acked - 50)

	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.exited

	p = startServer(t, dataDir, addr)
	ch, err = p.dial().Channel()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for {
		d, ok, err := ch.Get("orders", true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		seen[string(d.Body)]++
	}
	for i := 0; i < total; i++ {
		body := fmt.Sprintf("m%04d", i)
		switch {
		case gone[body] && seen[body] > 0:
			t.Errorf("acked message %s came back", body)
		case !gone[body] && seen[body] != 1:
			t.Errorf("confirmed message %s seen %d times after the restart", body, seen[body])
		}
	}
}
