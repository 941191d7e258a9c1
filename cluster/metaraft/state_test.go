package metaraft

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/warrenmq/warren/cluster/catalog"
)

// roundTrip encodes and decodes changes as the log does.
func roundTrip(t *testing.T, id string, changes ...catalog.Change) *entry {
	t.Helper()
	data, err := encodeEntry(&entry{Origin: "o", ID: id, Changes: changes})
	if err != nil {
		t.Fatal(err)
	}
	e, err := decodeEntry(data)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

var (
	vhostA = catalog.Vhost{Name: "a", DefaultQueueType: "quorum"}
	queueQ = catalog.Queue{Vhost: "a", Name: "q", Type: "quorum", Durable: true, Arguments: []byte{0, 0, 0, 1, 'x'}, Members: []string{"n1", "n2"}, ID: "g1"}
	exchX  = catalog.Exchange{Vhost: "a", Name: "x", Type: "topic", Durable: true, Arguments: []byte{9, 8, 7}}
	bindB  = catalog.Binding{Vhost: "a", Source: "x", Destination: "q", Kind: catalog.ToQueue, RoutingKey: "k.#", Arguments: []byte{1, 2}}
	userU  = catalog.User{Name: "guest", PasswordHash: "h", Tags: []string{"administrator"}}
	permP  = catalog.Permission{User: "guest", Vhost: "a", Configure: ".*", Write: ".*", Read: ".*"}
	polP   = catalog.Policy{Vhost: "a", Name: "p", Pattern: "^q", ApplyTo: "queues", Definition: []byte{0, 0, 0, 0}, Priority: 2}
	opolP  = catalog.Policy{Vhost: "a", Name: "p", Operator: true, Pattern: ".*", ApplyTo: "all", Definition: []byte{1}}
)

func TestStateApply(t *testing.T) {
	s := newState()
	if r := s.apply(1, roundTrip(t, "p1", catalog.Put(vhostA), catalog.Create(queueQ))); !r.changed() {
		t.Fatalf("first create: %+v", r)
	}
	if r := s.apply(2, roundTrip(t, "p2", catalog.Create(queueQ))); !r.exists || r.changed() {
		t.Fatalf("second create: %+v, want exists", r)
	}
	// The refusal covers the whole batch, and counts changes earlier in it.
	if r := s.apply(3, roundTrip(t, "p3", catalog.Put(exchX), catalog.Create(queueQ))); !r.exists {
		t.Fatalf("batch with a refused create: %+v", r)
	}
	if r := s.apply(4, roundTrip(t, "p4", catalog.Put(exchX), catalog.Create(exchX))); !r.exists {
		t.Fatalf("create after a put in one batch: %+v", r)
	}
	if r := s.apply(5, roundTrip(t, "p5", catalog.Del(queueQ), catalog.Create(queueQ))); !r.changed() {
		t.Fatalf("create after a delete in one batch: %+v", r)
	}
	if len(s.exchanges) != 0 {
		t.Fatalf("a refused batch changed the state: %v", s.exchanges)
	}
	// A repeated proposal answers its first outcome and changes nothing.
	if r := s.apply(6, roundTrip(t, "p2", catalog.Put(exchX))); !r.repeat || !r.exists {
		t.Fatalf("repeat of a refused proposal: %+v", r)
	}
	if r := s.apply(7, roundTrip(t, "p1", catalog.Del(vhostA))); !r.repeat || r.exists {
		t.Fatalf("repeat of an applied proposal: %+v", r)
	}
	if len(s.vhosts) != 1 || len(s.exchanges) != 0 || s.index != 7 {
		t.Fatalf("state after repeats: vhosts %v exchanges %v index %d", s.vhosts, s.exchanges, s.index)
	}
}

func TestStateRecentIsBounded(t *testing.T) {
	s := newState()
	for i := range recentProposals + 10 {
		s.apply(uint64(i+1), &entry{ID: randomID(4), Changes: []catalog.Change{catalog.Put(vhostA)}})
	}
	if len(s.recent) != recentProposals || len(s.seen) != recentProposals {
		t.Fatalf("recent %d seen %d, want %d", len(s.recent), len(s.seen), recentProposals)
	}
}

// The state keys and orders records exactly as metadata.BoltStore does.
func TestStateMatchesBoltStore(t *testing.T) {
	bolt, err := catalog.OpenBolt(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer bolt.Close()
	s := newState()
	batches := [][]catalog.Change{
		{catalog.Put(vhostA), catalog.Put(catalog.Vhost{Name: "b"}), catalog.Put(userU), catalog.Put(permP)},
		{catalog.Put(exchX), catalog.Put(catalog.Exchange{Vhost: "b", Name: "x", Type: "direct"}), catalog.Put(queueQ)},
		{catalog.Put(bindB), catalog.Put(catalog.Binding{Vhost: "a", Source: "x", Destination: "q", RoutingKey: "k.#", Arguments: []byte{3}})},
		{catalog.Put(catalog.Binding{Vhost: "a", Source: "x", Destination: "x2", Kind: catalog.ToExchange, RoutingKey: "k"})},
		{catalog.Create(queueQ)},
		{catalog.Del(catalog.Vhost{Name: "b"}), catalog.Del(bindB)},
		{catalog.Put(catalog.Queue{Vhost: "a", Name: "p", Type: "classic"})},
		{catalog.Put(polP), catalog.Put(opolP), catalog.Put(catalog.Policy{Vhost: "b", Name: "p"})},
		{catalog.Create(opolP)},
		{catalog.Del(catalog.Policy{Vhost: "b", Name: "p"})},
	}
	for i, b := range batches {
		berr := bolt.Apply(b...)
		r := s.apply(uint64(i+1), roundTrip(t, randomID(4), b...))
		if errors.Is(berr, catalog.ErrExists) != r.exists {
			t.Fatalf("batch %d: bolt %v, state %+v", i, berr, r)
		}
	}
	want, err := bolt.Load()
	if err != nil {
		t.Fatal(err)
	}
	if got := s.snapshot(); !reflect.DeepEqual(got, want) {
		t.Fatalf("state\n%+v\nbolt\n%+v", got, want)
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	s := newState()
	s.apply(1, roundTrip(t, "p1", catalog.Put(vhostA), catalog.Put(userU), catalog.Put(permP)))
	s.apply(2, roundTrip(t, "p2", catalog.Put(exchX), catalog.Put(queueQ), catalog.Put(bindB)))
	s.apply(3, roundTrip(t, "p3", catalog.Create(queueQ)))
	s.apply(4, roundTrip(t, "p4", catalog.Put(polP), catalog.Put(opolP)))
	if len(s.policies) != 2 {
		t.Fatalf("a policy and an operator policy of one name: %v", s.policies)
	}
	data, err := s.marshal()
	if err != nil {
		t.Fatal(err)
	}
	again, _ := s.marshal()
	if !bytes.Equal(data, again) {
		t.Fatal("the same state gave different snapshot bytes")
	}
	r, err := unmarshalState(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r, s) {
		t.Fatalf("restored\n%+v\nwant\n%+v", r, s)
	}
	if redo, _ := r.marshal(); !bytes.Equal(redo, data) {
		t.Fatal("restored state gives other bytes")
	}
	if _, err := unmarshalState([]byte(`{"version":99}`)); err == nil {
		t.Fatal("unknown snapshot version accepted")
	}
}

func TestEntryEncoding(t *testing.T) {
	e := roundTrip(t, "id", catalog.Create(queueQ), catalog.Del(bindB), catalog.Put(opolP))
	if e.Origin != "o" || e.ID != "id" || len(e.Changes) != 3 || !reflect.DeepEqual(*e.Changes[2].Policy, opolP) ||
		!e.Changes[0].IfAbsent || !reflect.DeepEqual(*e.Changes[0].Queue, queueQ) ||
		!e.Changes[1].Delete || !reflect.DeepEqual(*e.Changes[1].Binding, bindB) {
		t.Fatalf("decoded %+v", e)
	}
	if _, err := encodeEntry(&entry{ID: "x", Changes: []catalog.Change{{}}}); err == nil {
		t.Fatal("empty change encoded")
	}
	if _, err := encodeEntry(&entry{ID: "x", Changes: []catalog.Change{{Vhost: &vhostA, Queue: &queueQ}}}); err == nil {
		t.Fatal("change with two records encoded")
	}
	for _, bad := range [][]byte{nil, {0}, {99, '{', '}'}, {opChanges, 'x'}, append([]byte{opChanges}, `{"id":"x","changes":[{}]}`...)} {
		if _, err := decodeEntry(bad); err == nil {
			t.Fatalf("decoded %q", bad)
		}
	}
}

// TestStateQueueDeleteNamesItsID: a deletion naming a queue's ID leaves a
// queue declared again under the same name (another ID) alone, as a node
// removing another node's stale transient queue must; without an ID it
// deletes by name, as before IDs.
func TestStateQueueDeleteNamesItsID(t *testing.T) {
	s := newState()
	s.apply(1, roundTrip(t, "p1", catalog.Put(vhostA), catalog.Create(queueQ)))
	old := queueQ
	old.ID = "g0"
	s.apply(2, roundTrip(t, "p2", catalog.Del(old)))
	if got, ok := s.queues[key("a", "q")]; !ok || got.ID != "g1" {
		t.Fatalf("a deletion of an earlier queue took its successor: %+v %v", got, ok)
	}
	s.apply(3, roundTrip(t, "p3", catalog.Del(queueQ)))
	if _, ok := s.queues[key("a", "q")]; ok {
		t.Fatal("a deletion naming the queue's ID left it")
	}
	s.apply(4, roundTrip(t, "p4", catalog.Create(queueQ)))
	s.apply(5, roundTrip(t, "p5", catalog.Del(catalog.Queue{Vhost: "a", Name: "q"})))
	if _, ok := s.queues[key("a", "q")]; ok {
		t.Fatal("a deletion without an ID left the queue")
	}
}
