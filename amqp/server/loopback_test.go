package server_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"golang.org/x/sys/unix"

	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/cluster/catalog"
	"github.com/warrenmq/warren/cluster/node"
)

// remoteHost is a network namespace joined to this one by a veth pair: a
// second host on the same machine, whose connections reach the node from
// a non-loopback address.
type remoteHost struct {
	ns       string
	hostIP   string // our end of the veth pair
	remoteIP string // the namespace's end
}

func newRemoteHost(t *testing.T) *remoteHost {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip command")
	}
	id := os.Getpid() % 100000
	h := &remoteHost{
		ns:       fmt.Sprintf("warren-t%d", id),
		hostIP:   "10.213.7.1",
		remoteIP: "10.213.7.2",
	}
	hostIf, nsIf := fmt.Sprintf("wvh%d", id), fmt.Sprintf("wvn%d", id)
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	// Left over from a killed run: remove quietly.
	exec.Command("ip", "netns", "del", h.ns).Run()
	exec.Command("ip", "link", "del", hostIf).Run()

	run("netns", "add", h.ns)
	t.Cleanup(func() {
		exec.Command("ip", "netns", "del", h.ns).Run()
		exec.Command("ip", "link", "del", hostIf).Run()
	})
	run("link", "add", hostIf, "type", "veth", "peer", "name", nsIf)
	run("link", "set", nsIf, "netns", h.ns)
	run("addr", "add", h.hostIP+"/30", "dev", hostIf)
	run("link", "set", hostIf, "up")
	run("-n", h.ns, "addr", "add", h.remoteIP+"/30", "dev", nsIf)
	run("-n", h.ns, "link", "set", nsIf, "up")
	run("-n", h.ns, "link", "set", "lo", "up")
	return h
}

// dial connects from inside the namespace: the socket is created by an OS
// thread that has joined the namespace, then the thread returns home.
func (h *remoteHost) dial(network, addr string) (conn net.Conn, err error) {
	runtime.LockOSThread()
	home, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer home.Close()
	target, err := os.Open("/var/run/netns/" + h.ns)
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("enter namespace: %w", err)
	}
	conn, err = net.Dial(network, addr)
	if rerr := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); rerr != nil {
		// Leave the thread locked: Go ends it with the goroutine rather
		// than reuse a thread stuck in the wrong namespace.
		return nil, errors.Join(err, fmt.Errorf("return from namespace: %w", rerr))
	}
	runtime.UnlockOSThread()
	return conn, err
}

// TestGuestOnlyFromLoopback checks RabbitMQ's loopback_users rule: guest
// may log in from 127.0.0.1 but not from another host, while other users
// may log in from anywhere.
func TestGuestOnlyFromLoopback(t *testing.T) {
	h := newRemoteHost(t)
	n := startNode(t, func(c *node.Config) {
		c.AMQPAddr = "0.0.0.0:0"
		c.Broker.Seed = broker.DefaultSeed()
		c.Broker.Seed.Users = append(c.Broker.Seed.Users, broker.SeedUser{Name: "remote", Password: "pw"})
		c.Broker.Seed.Permissions = append(c.Broker.Seed.Permissions, catalog.Permission{User: "remote", Vhost: "/", Configure: ".*", Write: ".*", Read: ".*"})
	})
	_, port, _ := net.SplitHostPort(n.AMQPAddr().String())

	fromRemote := func(user, pass string) (*amqp091.Connection, error) {
		url := fmt.Sprintf("amqp://%s:%s@%s/", user, pass, net.JoinHostPort(h.hostIP, port))
		return amqp091.DialConfig(url, amqp091.Config{Dial: h.dial})
	}

	_, err := fromRemote("guest", "guest")
	if err == nil {
		t.Fatal("guest logged in from a non-loopback address")
	}
	// amqp091-go announces authentication_failure_close, so the refusal
	// arrives as connection.close 403 rather than a dropped socket.
	if !errors.Is(err, amqp091.ErrCredentials) && amqpCode(err) != amqp091.AccessRefused {
		t.Fatalf("guest from remote: got %v, want access refused", err)
	}

	c, err := fromRemote("remote", "pw")
	if err != nil {
		t.Fatalf("non-guest user from remote: %v", err)
	}
	if la, ok := c.LocalAddr().(*net.TCPAddr); !ok || la.IP.String() != h.remoteIP {
		t.Fatalf("connection came from %v, not the namespace", c.LocalAddr())
	}
	c.Close()

	local, err := amqp091.Dial(fmt.Sprintf("amqp://guest:guest@127.0.0.1:%s/", port))
	if err != nil {
		t.Fatalf("guest from loopback: %v", err)
	}
	local.Close()
}
