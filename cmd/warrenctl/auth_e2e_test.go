package main

import (
	"github.com/warrenmq/warren/raftq/testwait"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/cluster/pki"
)

// TestOperatorCredentials runs warrenctl against a cluster with mutual TLS
// between its nodes: without credentials it is refused; a monitoring user
// (by password, or by its client certificate) can list but not delete; an
// administrator can delete.
func TestOperatorCredentials(t *testing.T) {
	ca := nodetest.NewCA(t)
	ms := nodetest.StartCluster(t, 3, nodetest.TLS(t, ca, []byte("0123456789abcdef0123456789abcdef")))
	b := ms[0].Broker()
	if err := b.AddUser("watcher", "watch-pass", []string{"monitoring"}); err != nil {
		t.Fatal(err)
	}
	if err := b.AddUser("boss", "boss-pass", []string{"administrator"}); err != nil {
		t.Fatal(err)
	}
	node := ms[1].InternalAddr().String()
	caPEM := filepath.Join(ca, pki.CACertFile)
	_, watcherCert := nodetest.Issue(t, ca, pki.Request{Kind: pki.Client, Name: "watcher"})

	if code, _, errOut := warrenctl(t, "--node", node, "--ca", caPEM, "list", "users"); code != exitFailure || !strings.Contains(errOut, "credentials required") {
		t.Fatalf("no credentials: exit %d: %s", code, errOut)
	}
	if code, _, errOut := warrenctl(t, "--node", node, "list", "users"); code != exitFailure {
		t.Fatalf("plaintext against a TLS port: exit %d: %s", code, errOut)
	}
	testwait.For(t, 10*time.Second, "both users to reach the node", func() bool {
		code, out, _ := warrenctl(t, "--node", node, "--ca", caPEM, "--user", "watcher", "--password", "watch-pass", "list", "users")
		return code == exitOK && strings.Contains(out, "boss")
	})
	code, out, errOut := warrenctl(t, "--node", node, "--ca", caPEM, "--cert", watcherCert.Cert, "--key", watcherCert.Key, "list", "users")
	if code != exitOK || !strings.Contains(out, "boss") {
		t.Fatalf("monitoring user by certificate: exit %d: %s%s", code, out, errOut)
	}
	if code, _, errOut := warrenctl(t, "--node", node, "--ca", caPEM, "--user", "watcher", "--password", "watch-pass", "delete", "user", "boss"); code != exitFailure || !strings.Contains(errOut, "administrator") {
		t.Fatalf("monitoring user deleting: exit %d: %s", code, errOut)
	}
	if code, _, errOut := warrenctl(t, "--node", node, "--ca", caPEM, "--user", "boss", "--password", "boss-pass", "delete", "user", "watcher"); code != exitOK {
		t.Fatalf("administrator deleting: exit %d: %s", code, errOut)
	}
}
