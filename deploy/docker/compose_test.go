//go:build docker

// Package docker checks deploy/docker's cluster end to end, as a user
// runs it: the image `make image` builds, a 3-node compose cluster that
// forms, takes confirmed publishes and consumes across its nodes, loses a
// queue's leader to `docker kill` without losing a confirmed message, and
// takes the node back. The cluster runs as deployed: mutual TLS between
// the nodes, an encrypted gossip, warrenctl in the containers with a client
// certificate, and an AMQPS listener on which a client logs in with its
// certificate (EXTERNAL). `make deploy-check` runs it (Docker and
// docker-compose needed, bin/warrenctl built, host ports 5672-5674,
// 5681-5683 and 15692-15694 free); make test does not.
package docker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/raftq/testwait"
)

const (
	project = "warren-deploy-check"
	queue   = "deploy-check"
)

func uri(node int) string { return fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", 5672+node) }

// dial connects to node over AMQP with guest's password.
func dial(t *testing.T, node int) *amqp091.Connection {
	t.Helper()
	c, err := amqp091.Dial(uri(node))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// dialTLS connects to node's AMQPS port, checking the node's certificate
// against the cluster CA, and logs in with guest's client certificate
// (EXTERNAL), as make-certs.sh made them.
func dialTLS(t *testing.T, node int) *amqp091.Connection {
	t.Helper()
	ca, err := os.ReadFile("tls/ca/ca.pem")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	cert, err := tls.LoadX509KeyPair("tls/ca/clients/guest.pem", "tls/ca/clients/guest-key.pem")
	if err != nil {
		t.Fatal(err)
	}
	c, err := amqp091.DialTLS_ExternalAuth(fmt.Sprintf("amqps://127.0.0.1:%d/", 5681+node),
		&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestComposeCluster(t *testing.T) {
	run(t, "./make-certs.sh")
	run(t, "docker-compose", "-f", "compose-3.yml", "-p", project, "up", "-d")
	t.Cleanup(func() { run(t, "docker-compose", "-f", "compose-3.yml", "-p", project, "down", "-v") })

	testwait.ForNil(t, 90*time.Second, "three nodes in one cluster, each serving clients", func() error {
		for i := range 3 {
			c, err := amqp091.Dial(uri(i))
			if err != nil {
				return err
			}
			c.Close()
		}
		var status struct{ Nodes []struct{ State string } }
		if err := warrenctl("warren-0", &status, "cluster", "status"); err != nil {
			return err
		}
		for _, n := range status.Nodes {
			if n.State != "alive" {
				return fmt.Errorf("nodes %+v", status.Nodes)
			}
		}
		if len(status.Nodes) != 3 {
			return fmt.Errorf("%d nodes", len(status.Nodes))
		}
		return nil
	})

	// The internal port takes no operator without credentials: warrenctl
	// without the container's client certificate is refused.
	if err := warrenctlEnv("warren-0", []string{"WARRENCTL_CERT=", "WARRENCTL_KEY="}, &struct{}{}, "cluster", "status"); err == nil || !strings.Contains(err.Error(), "credentials required") {
		t.Fatalf("warrenctl without a client certificate: %v, want refused for want of credentials", err)
	}

	ch := channel(t, 0)
	if _, err := ch.QueueDeclare(queue, true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	confirmed := publish(t, 0, 0, 1000)
	delivered := consume(t, dial(t, 1), 400)

	leader := queueView(t, "warren-1", 3).leader
	run(t, "docker", "kill", leader)
	other := 0
	if leader == "warren-0" {
		other = 2
	}
	testwait.ForNil(t, 30*time.Second, "a new leader", func() error {
		if q := queueView(t, fmt.Sprintf("warren-%d", other), 0); q.leader == leader {
			return errors.New("still the killed node")
		}
		return nil
	})
	confirmed = append(confirmed, publish(t, other, 1000, 1000)...)
	run(t, "docker", "start", leader)
	queueView(t, fmt.Sprintf("warren-%d", other), 3)

	delivered = append(delivered, consume(t, dialTLS(t, 2), len(confirmed)-len(delivered))...)
	seen := map[string]bool{}
	for _, id := range delivered {
		if seen[id] {
			t.Errorf("message %s delivered twice", id)
		}
		seen[id] = true
	}
	for _, id := range confirmed {
		if !seen[id] {
			t.Errorf("confirmed message %s never delivered", id)
		}
	}
}

type view struct {
	leader string
	online int
}

// queueView waits until node lists the queue with a leader and at least
// online members online, and returns what it shows.
func queueView(t *testing.T, node string, online int) view {
	t.Helper()
	var v view
	testwait.ForNil(t, 60*time.Second, fmt.Sprintf("%s to list the queue led, %d members online", node, online), func() error {
		var list struct {
			Queues []struct {
				Name, Leader string
				Online       []string `json:"online_members"`
			}
		}
		if err := warrenctl(node, &list, "list", "queues"); err != nil {
			return err
		}
		for _, q := range list.Queues {
			if q.Name == queue && q.Leader != "" && len(q.Online) >= online {
				v = view{q.Leader, len(q.Online)}
				return nil
			}
		}
		return fmt.Errorf("queues %+v", list.Queues)
	})
	return v
}

// publish sends n messages numbered from first through node with
// confirms and returns the confirmed ones' IDs.
func publish(t *testing.T, node, first, n int) []string {
	t.Helper()
	ch := channel(t, node)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	var ids []string
	var pending []*amqp091.DeferredConfirmation
	for i := first; i < first+n; i++ {
		id := fmt.Sprint(i)
		dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", queue, false, false,
			amqp091.Publishing{MessageId: id, DeliveryMode: amqp091.Persistent, Body: []byte(id)})
		if err != nil {
			t.Fatalf("publish %s: %v", id, err)
		}
		ids = append(ids, id)
		pending = append(pending, dc)
	}
	for i, dc := range pending {
		if ok, err := dc.WaitContext(context.Background()); err != nil || !ok {
			t.Fatalf("publish %s not confirmed: %v", ids[i], err)
		}
	}
	return ids
}

// consume takes n messages through c, acknowledging each, and returns
// their IDs. It closes c at the end, which gives back what the consumer was
// sent beyond n.
func consume(t *testing.T, c *amqp091.Connection, n int) []string {
	t.Helper()
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Qos(100, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for len(ids) < n {
		select {
		case d := <-ds:
			ids = append(ids, d.MessageId)
			if err := d.Ack(false); err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%d of %d messages delivered through %s", len(ids), n, c.RemoteAddr())
		}
	}
	return ids
}

func channel(t *testing.T, node int) *amqp091.Channel {
	t.Helper()
	c, err := amqp091.Dial(uri(node))
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

// warrenctl runs warrenctl --json in node's container and decodes its
// report into out. It talks TLS to the node and authenticates with a
// client certificate: the container's WARRENCTL_* variables, from the env
// file make-certs.sh writes.
func warrenctl(node string, out any, args ...string) error {
	return warrenctlEnv(node, nil, out, args...)
}

// warrenctlEnv is warrenctl with env (NAME=VALUE) set for it.
func warrenctlEnv(node string, env []string, out any, args ...string) error {
	dockerArgs := []string{"exec"}
	for _, e := range env {
		dockerArgs = append(dockerArgs, "-e", e)
	}
	dockerArgs = append(dockerArgs, node, "/warrenctl", "--json")
	cmd := exec.Command("docker", append(dockerArgs, args...)...)
	b, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("warrenctl %s on %s: %w: %s", strings.Join(args, " "), node, err, ee.Stderr)
		}
		return fmt.Errorf("warrenctl %s on %s: %w", strings.Join(args, " "), node, err)
	}
	return json.Unmarshal(b, out)
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}
