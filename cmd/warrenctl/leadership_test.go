package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/warrenmq/warren/cluster/admin"
)

// fixedNode's leadership never moves: warren-0 leads orders, warren-1
// follows, warren-2 is down.
func (n *fixedNode) LocalMembers() map[string]admin.MemberStatus {
	return map[string]admin.MemberStatus{"q-orders": n.member}
}
func (n *fixedNode) TransferLeadership(context.Context, string, string) error {
	return admin.ErrNotLeader
}

func TestTransferLeadership(t *testing.T) {
	addrs := startCluster(t)
	code, out, errOut := warrenctl(t, "--node", addrs["warren-1"], "transfer", "leadership", "orders", "warren-0")
	if code != 0 || out != "Queue 'orders' in vhost '/' is already led by warren-0.\n" {
		t.Errorf("exit %d: %q %q", code, out, errOut)
	}
	code, out, _ = warrenctl(t, "--node", addrs["warren-1"], "--json", "transfer", "leadership", "orders", "warren-0", "--vhost", "/")
	var r transferReport
	if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil || r != (transferReport{Vhost: "/", Queue: "orders", From: "warren-0", To: "warren-0"}) {
		t.Errorf("exit %d, %v: %s", code, err, out)
	}
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"orders", "warren-2"}, 1, "warrenctl: node 'warren-2' is not alive\n"},
		{[]string{"orders", "warren-9"}, 1, "warrenctl: node 'warren-9' is not a member of queue 'orders' in vhost '/' (members: [warren-0 warren-1 warren-2])\n"},
		{[]string{"nope", "warren-1"}, 1, "warrenctl: queue 'nope' in vhost '/' not found\n"},
		{[]string{"orders"}, 2, "warrenctl: transfer leadership needs NODE\n"},
	} {
		code, out, errOut := warrenctl(t, append([]string{"--node", addrs["warren-0"], "transfer", "leadership"}, tc.args...)...)
		if code != tc.code || out != "" || !strings.HasPrefix(errOut, tc.stderr) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", tc.args, code, out, errOut)
		}
	}
}

func TestTransferReportText(t *testing.T) {
	var b bytes.Buffer
	(&transferReport{Vhost: "/", Queue: "orders", From: "warren-0", To: "warren-2", Moved: true}).writeText(&b)
	if want := "Moved the leader of queue 'orders' in vhost '/' from warren-0 to warren-2.\n"; b.String() != want {
		t.Errorf("got %q", b.String())
	}
}

// One queue led by warren-0 of the two alive nodes is as balanced as it
// gets.
func TestRebalanceCommand(t *testing.T) {
	addrs := startCluster(t)
	code, out, errOut := warrenctl(t, "--node", addrs["warren-1"], "rebalance")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := "Quorum queue leaders are balanced: nothing moved.\n\n" +
		"NODE | LEADERS BEFORE | LEADERS AFTER\n" +
		"warren-0 | 1 | 1\n" +
		"warren-1 | 0 | 0\n"
	if columns(out) != want {
		t.Errorf("got\n%s\nwant\n%s", columns(out), want)
	}
	code, out, _ = warrenctl(t, "--node", addrs["warren-1"], "rebalance", "--queue-pattern", "^nothing$", "--json")
	var r rebalanceReport
	if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil || len(r.Moves) != 0 || len(r.Nodes) != 0 {
		t.Errorf("exit %d, %v: %s", code, err, out)
	}
	code, _, errOut = warrenctl(t, "--node", addrs["warren-1"], "rebalance", "--vhost-pattern", "(")
	if code != 1 || !strings.Contains(errOut, "--vhost-pattern: error parsing regexp") {
		t.Errorf("exit %d: %s", code, errOut)
	}
}

func TestRebalanceReportText(t *testing.T) {
	r := &rebalanceReport{
		Moves: []moveReport{
			{Vhost: "/", Queue: "a", From: "warren-0", To: "warren-1"},
			{Vhost: "/", Queue: "b", From: "warren-0", To: "warren-2", Error: "leadership transfer timeout"},
		},
		Nodes:      []nodeLeaders{{Node: "warren-0", Before: 3, After: 2}, {Node: "warren-1", Before: 0, After: 1}},
		Leaderless: []queueRef{{Vhost: "/", Queue: "c"}},
		Failed:     1,
	}
	var b bytes.Buffer
	r.writeText(&b)
	want := "Moved 1 quorum queue leader(s); 1 move(s) failed.\n\n" +
		"VHOST | QUEUE | FROM | TO | RESULT\n" +
		"/ | a | warren-0 | warren-1 | moved\n" +
		"/ | b | warren-0 | warren-2 | failed: leadership transfer timeout\n\n" +
		"NODE | LEADERS BEFORE | LEADERS AFTER\n" +
		"warren-0 | 3 | 2\n" +
		"warren-1 | 0 | 1\n\n" +
		"Left alone, without a leader: 'c' in vhost '/'\n"
	if columns(b.String()) != want || !r.failed() {
		t.Errorf("got\n%s\nwant\n%s", columns(b.String()), want)
	}
}

// warren-2 is down: stopping warren-0 or warren-1 leaves orders one of
// three; stopping warren-2 changes nothing.
func TestChecks(t *testing.T) {
	addrs := startCluster(t)
	node := addrs["warren-1"]
	code, out, errOut := warrenctl(t, "--node", node, "check", "quorum-critical", "warren-0")
	want := "Node warren-0 is quorum critical: 1 quorum queue(s) would be left without a majority of online members if it stopped.\n\n" +
		"VHOST | NAME | LEADER | ONLINE | MEMBERS\n" +
		"/ | orders | warren-0 | 2/3 | warren-0,warren-1,warren-2\n"
	if code != 1 || columns(out) != want || errOut != "" {
		t.Errorf("exit %d, stderr %q, got\n%s\nwant\n%s", code, errOut, columns(out), want)
	}
	code, out, _ = warrenctl(t, "--node", node, "check", "quorum-critical", "warren-2")
	if code != 0 || out != "Node warren-2 is not quorum critical: no quorum queue would lose its majority if it stopped.\n" {
		t.Errorf("warren-2: exit %d: %q", code, out)
	}
	code, out, _ = warrenctl(t, "--node", node, "--json", "check", "quorum-critical", "warren-1")
	var r checkReport
	if err := json.Unmarshal([]byte(out), &r); code != 1 || err != nil || r.Passed || r.Check != "quorum-critical" ||
		r.Node != "warren-1" || len(r.Queues) != 1 || r.Queues[0].Name != "orders" || len(r.Queues[0].OnlineMembers) != 2 {
		t.Errorf("json: exit %d, %v: %s", code, err, out)
	}
	code, _, errOut = warrenctl(t, "--node", node, "check", "quorum-critical", "warren-9")
	if code != 1 || errOut != "warrenctl: node 'warren-9' is not a cluster member\n" {
		t.Errorf("unknown node: exit %d: %q", code, errOut)
	}

	code, out, _ = warrenctl(t, "--node", node, "check", "leaderless")
	if code != 0 || out != "Every quorum queue has a leader.\n" {
		t.Errorf("leaderless: exit %d: %q", code, out)
	}
	code, out, _ = warrenctl(t, "--node", node, "check", "leaderless", "--json")
	if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil || !r.Passed || len(r.Queues) != 0 {
		t.Errorf("leaderless json: exit %d, %v: %s", code, err, out)
	}

	var b bytes.Buffer
	(&checkReport{Check: "leaderless", Queues: []checkedQueue{{Vhost: "/", Name: "orders", Members: []string{"a", "b", "c"}, OnlineMembers: []string{"a"}}}}).writeText(&b)
	if want := "1 quorum queue(s) have no leader.\n\nVHOST | NAME | LEADER | ONLINE | MEMBERS\n/ | orders | - | 1/3 | a,b,c\n"; columns(b.String()) != want {
		t.Errorf("got\n%s", columns(b.String()))
	}
}

// Commands that wait for the cluster default to a longer --timeout,
// which --timeout still overrides.
func TestCommandTimeout(t *testing.T) {
	code, out, _ := warrenctl(t, "rebalance", "--help")
	if code != 0 || !strings.Contains(out, "--timeout defaults to 10m0s for this command.") {
		t.Errorf("exit %d: %s", code, out)
	}
}

// Membership operations are tested against real nodes (cluster/node).
func (*fixedNode) AddMember(context.Context, string, string, string, string) error {
	return errNoMembership
}
func (*fixedNode) DeleteMember(context.Context, string, string, string, bool) error {
	return errNoMembership
}
func (*fixedNode) Grow(context.Context, string, string, string, string, string) ([]string, error) {
	return nil, errNoMembership
}
func (*fixedNode) Shrink(context.Context, string) ([]string, error) { return nil, errNoMembership }

var errNoMembership = errors.New("membership changes are not simulated here")
