package broker

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/catalog"
)

// TestAccessChanges drives users, vhosts and permissions through a
// standalone broker and its store: what is committed, what the model
// answers, which connections are revoked, and that a restart reads the
// same.
func TestAccessChanges(t *testing.T) {
	dir := t.TempDir()
	open := func() *Broker { return openTestBroker(t, dir) }
	b := open()
	var mu sync.Mutex
	var revoked []Revocation
	b.OnRevoke(func(r Revocation) { mu.Lock(); revoked = append(revoked, r); mu.Unlock() })

	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(b.AddVhost("v1", QueueTypeClassic))
	must(b.AddUser("u", "pw", []string{"monitoring"}))
	must(b.SetPermissions(catalog.Permission{User: "u", Vhost: "v1", Configure: ".*", Write: ".*", Read: ".*"}))
	for _, c := range []struct {
		err  error
		want error
	}{
		{b.AddUser("u", "other", nil), ErrUserExists},
		{b.AddVhost("v1", ""), ErrVhostExists},
		{b.AddVhost("v2", "stream"), ErrInvalidAccess},
		{b.SetPermissions(catalog.Permission{User: "nobody", Vhost: "v1"}), ErrNoUser},
		{b.SetPermissions(catalog.Permission{User: "u", Vhost: "v9"}), ErrNoVhost},
		{b.SetPermissions(catalog.Permission{User: "u", Vhost: "v1", Read: "("}), ErrInvalidAccess},
		{b.ClearPermissions("guest", "v1"), ErrNoAccess},
		{b.DeleteVhost("v9"), ErrNoVhost},
		{b.DeleteUser("nobody"), ErrNoUser},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("got %v, want %v", c.err, c.want)
		}
	}
	if _, err := b.Authenticate("PLAIN", "u", "pw", nil); err != nil {
		t.Fatalf("the new user cannot log in: %v", err)
	}
	must(b.ChangePassword("u", "pw2"))
	if _, err := b.Authenticate("PLAIN", "u", "pw", nil); err == nil {
		t.Fatal("the old password still logs in")
	}

	// Fill the vhost: a durable exchange, a durable queue, a binding, a
	// policy.
	v := b.vhost("v1")
	must(v.DeclareExchange(nil, ExchangeDeclare{Name: "x", Type: "direct", Durable: true}))
	if _, _, err := v.DeclareQueue(nil, 1, QueueDeclare{Name: "q", Durable: true}); err != nil {
		t.Fatal(err)
	}
	must(v.BindQueue(nil, 1, QueueBinding{Queue: "q", Exchange: "x", RoutingKey: "k"}))
	must(b.SetPolicy(PolicyDef{Vhost: "v1", Name: "p", Pattern: ".*", Definition: wire.Table{"max-length": int64(5)}}))

	must(b.DeleteVhost("v1"))
	snap, err := b.store.Load()
	must(err)
	left := len(vhostRecords(snap, "v1"))
	if left != 0 || b.vhost("v1") != nil || slices.ContainsFunc(b.Vhosts(), func(v catalog.Vhost) bool { return v.Name == "v1" }) {
		t.Fatalf("after DeleteVhost: %d records left, model has it: %v", left, b.vhost("v1") != nil)
	}
	must(b.DeleteUser("u"))
	if len(b.Permissions("", "u")) != 0 || slices.ContainsFunc(b.Users(), func(u catalog.User) bool { return u.Name == "u" }) {
		t.Fatal("the deleted user or its permissions stayed")
	}
	mu.Lock()
	got := slices.Clone(revoked)
	mu.Unlock()
	want := []Revocation{{Vhost: "v1", Reason: "vhost 'v1' is deleted"}, {User: "u", Reason: "user 'u' is deleted"}}
	if !slices.Equal(got, want) {
		t.Fatalf("revocations %+v, want %+v", got, want)
	}

	// A restart reads the same.
	must(b.AddVhost("v3", ""))
	closeTestBroker(b)
	b = open()
	defer closeTestBroker(b)
	var names []string
	for _, v := range b.Vhosts() {
		names = append(names, v.Name+":"+v.DefaultQueueType)
	}
	if !slices.Equal(names, []string{"/:quorum", "v3:quorum"}) {
		t.Fatalf("vhosts after a restart: %v", names)
	}
	if slices.ContainsFunc(b.Users(), func(u catalog.User) bool { return u.Name == "u" }) {
		t.Fatal("the deleted user is back after a restart")
	}
}
