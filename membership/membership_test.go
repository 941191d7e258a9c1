package membership

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"sort"
	"testing"
	"time"

	"github.com/warrenmq/warren/raftq/testwait"
)

func startNode(t *testing.T, name string, key []byte) *Membership {
	t.Helper()
	m, err := Start(Config{
		Meta:          Meta{Name: name, AMQP: "127.0.0.1:5672", Internal: "127.0.0.1:25672", Version: "test"},
		BindAddr:      "127.0.0.1:0",
		SecretKey:     key,
		ProbeInterval: 100 * time.Millisecond,
		ProbeTimeout:  50 * time.Millisecond,
		// Quick, for TestMemberSeenDeadIsJoinedAgain.
		ReconnectInterval: 200 * time.Millisecond,
		Log:               slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Stop() })
	return m
}

func names(ms []Member, want State) []string {
	var out []string
	for _, m := range ms {
		if m.State == want {
			out = append(out, m.Name)
		}
	}
	sort.Strings(out)
	return out
}

// waitEvent waits for an event about member name of the given kind.
func waitEvent(t *testing.T, m *Membership, kind EventKind, name string) Event {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case e := <-m.Events():
			if e.Kind == kind && e.Member.Name == name {
				return e
			}
		case <-deadline:
			t.Fatalf("no event %d for %s", kind, name)
		}
	}
}

func TestThreeNodesFindEachOtherAndNoticeDepartures(t *testing.T) {
	a := startNode(t, "a", nil)
	b := startNode(t, "b", nil)
	c := startNode(t, "c", nil)
	// b joins through a numeric address, c through a host name.
	if _, err := b.Join([]string{a.LocalAddr()}); err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(a.LocalAddr())
	if _, err := c.Join([]string{"localhost:" + port}); err != nil {
		t.Fatal(err)
	}
	e := waitEvent(t, a, Joined, "c")
	if e.Member.AMQP != "127.0.0.1:5672" || e.Member.Internal != "127.0.0.1:25672" || e.Member.Gossip != c.LocalAddr() {
		t.Fatalf("c's metadata as a sees it: %+v", e.Member.Meta)
	}
	testwait.ForNil(t, 10*time.Second, "b to see a, b and c alive", func() error {
		if alive := fmt.Sprint(names(b.Members(), Alive)); alive != "[a b c]" {
			return fmt.Errorf("b sees %s", alive)
		}
		return nil
	})

	// A graceful leave and a crash are told apart.
	if err := c.Leave(time.Second); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, a, Departed, "c")
	b.Stop()
	e = waitEvent(t, a, Failed, "b")
	if e.Member.State != Dead {
		t.Fatalf("failed member state %v", e.Member.State)
	}
}

func TestGossipEncryptionKeepsStrangersOut(t *testing.T) {
	key := []byte("0123456789abcdef")
	a := startNode(t, "a", key)
	b := startNode(t, "b", key)
	if _, err := b.Join([]string{a.LocalAddr()}); err != nil {
		t.Fatalf("same key: %v", err)
	}
	stranger := startNode(t, "x", []byte("fedcba9876543210"))
	if _, err := stranger.Join([]string{a.LocalAddr()}); err == nil {
		t.Fatal("a node with another key joined")
	}
	for _, m := range a.Members() {
		if m.Name == "x" {
			t.Fatal("the stranger is listed as a member")
		}
	}
}

// TestOnEventAndAlarms: OnEvent first replays the members gossip knows,
// then follows what happens, without anyone reading Events; a node's
// alarms reach the others as metadata.
func TestOnEventAndAlarms(t *testing.T) {
	a := startNode(t, "a", nil)
	b := startNode(t, "b", nil)
	if _, err := b.Join([]string{a.LocalAddr()}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, a, Joined, "b")
	seen := make(chan Event, 64)
	a.OnEvent(func(e Event) { seen <- e })
	next := func(what string, ok func(Event) bool) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case e := <-seen:
				if ok(e) {
					return
				}
			case <-deadline:
				t.Fatalf("no event: %s", what)
			}
		}
	}
	next("the replay of b", func(e Event) bool { return e.Member.Name == "b" && e.Member.State == Alive })
	if err := b.SetAlarms([]string{"disk"}, time.Second); err != nil {
		t.Fatal(err)
	}
	next("b's alarm", func(e Event) bool {
		return e.Kind == Updated && e.Member.Name == "b" && fmt.Sprint(e.Member.Alarms) == "[disk]"
	})
	b.Stop()
	next("b's failure", func(e Event) bool { return e.Kind == Failed && e.Member.Name == "b" })
}
