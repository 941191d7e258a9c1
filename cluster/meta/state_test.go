package meta

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/warrenmq/warren/cluster/metadata"
)

// roundTrip encodes and decodes changes as the log does.
func roundTrip(t *testing.T, id string, changes ...metadata.Change) *entry {
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
	vhostA = metadata.Vhost{Name: "a", DefaultQueueType: "quorum"}
	queueQ = metadata.Queue{Vhost: "a", Name: "q", Type: "quorum", Durable: true, Arguments: []byte{0, 0, 0, 1, 'x'}, Members: []string{"n1", "n2"}, ID: "g1"}
	exchX  = metadata.Exchange{Vhost: "a", Name: "x", Type: "topic", Durable: true, Arguments: []byte{9, 8, 7}}
	bindB  = metadata.Binding{Vhost: "a", Source: "x", Destination: "q", Kind: metadata.ToQueue, RoutingKey: "k.#", Arguments: []byte{1, 2}}
	userU  = metadata.User{Name: "guest", PasswordHash: "h", Tags: []string{"administrator"}}
	permP  = metadata.Permission{User: "guest", Vhost: "a", Configure: ".*", Write: ".*", Read: ".*"}
	polP   = metadata.Policy{Vhost: "a", Name: "p", Pattern: "^q", ApplyTo: "queues", Definition: []byte{0, 0, 0, 0}, Priority: 2}
	opolP  = metadata.Policy{Vhost: "a", Name: "p", Operator: true, Pattern: ".*", ApplyTo: "all", Definition: []byte{1}}
)

func TestStateApply(t *testing.T) {
	s := newState()
	if r := s.apply(1, roundTrip(t, "p1", metadata.Put(vhostA), metadata.Create(queueQ))); !r.changed() {
		t.Fatalf("first create: %+v", r)
	}
	if r := s.apply(2, roundTrip(t, "p2", metadata.Create(queueQ))); !r.exists || r.changed() {
		t.Fatalf("second create: %+v, want exists", r)
	}
	// The refusal covers the whole batch, and counts changes earlier in it.
	if r := s.apply(3, roundTrip(t, "p3", metadata.Put(exchX), metadata.Create(queueQ))); !r.exists {
		t.Fatalf("batch with a refused create: %+v", r)
	}
	if r := s.apply(4, roundTrip(t, "p4", metadata.Put(exchX), metadata.Create(exchX))); !r.exists {
		t.Fatalf("create after a put in one batch: %+v", r)
	}
	if r := s.apply(5, roundTrip(t, "p5", metadata.Del(queueQ), metadata.Create(queueQ))); !r.changed() {
		t.Fatalf("create after a delete in one batch: %+v", r)
	}
	if len(s.exchanges) != 0 {
		t.Fatalf("a refused batch changed the state: %v", s.exchanges)
	}
	// A repeated proposal answers its first outcome and changes nothing.
	if r := s.apply(6, roundTrip(t, "p2", metadata.Put(exchX))); !r.repeat || !r.exists {
		t.Fatalf("repeat of a refused proposal: %+v", r)
	}
	if r := s.apply(7, roundTrip(t, "p1", metadata.Del(vhostA))); !r.repeat || r.exists {
		t.Fatalf("repeat of an applied proposal: %+v", r)
	}
	if len(s.vhosts) != 1 || len(s.exchanges) != 0 || s.index != 7 {
		t.Fatalf("state after repeats: vhosts %v exchanges %v index %d", s.vhosts, s.exchanges, s.index)
	}
}

func TestStateRecentIsBounded(t *testing.T) {
	s := newState()
	for i := range recentProposals + 10 {
		s.apply(uint64(i+1), &entry{ID: randomID(4), Changes: []metadata.Change{metadata.Put(vhostA)}})
	}
	if len(s.recent) != recentProposals || len(s.seen) != recentProposals {
		t.Fatalf("recent %d seen %d, want %d", len(s.recent), len(s.seen), recentProposals)
	}
}

// The state keys and orders records exactly as metadata.BoltStore does.
func TestStateMatchesBoltStore(t *testing.T) {
	bolt, err := metadata.OpenBolt(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer bolt.Close()
	s := newState()
	batches := [][]metadata.Change{
		{metadata.Put(vhostA), metadata.Put(metadata.Vhost{Name: "b"}), metadata.Put(userU), metadata.Put(permP)},
		{metadata.Put(exchX), metadata.Put(metadata.Exchange{Vhost: "b", Name: "x", Type: "direct"}), metadata.Put(queueQ)},
		{metadata.Put(bindB), metadata.Put(metadata.Binding{Vhost: "a", Source: "x", Destination: "q", RoutingKey: "k.#", Arguments: []byte{3}})},
		{metadata.Put(metadata.Binding{Vhost: "a", Source: "x", Destination: "x2", Kind: metadata.ToExchange, RoutingKey: "k"})},
		{metadata.Create(queueQ)},
		{metadata.Del(metadata.Vhost{Name: "b"}), metadata.Del(bindB)},
		{metadata.Put(metadata.Queue{Vhost: "a", Name: "p", Type: "classic"})},
		{metadata.Put(polP), metadata.Put(opolP), metadata.Put(metadata.Policy{Vhost: "b", Name: "p"})},
		{metadata.Create(opolP)},
		{metadata.Del(metadata.Policy{Vhost: "b", Name: "p"})},
	}
	for i, b := range batches {
		berr := bolt.Apply(b...)
		r := s.apply(uint64(i+1), roundTrip(t, randomID(4), b...))
		if errors.Is(berr, metadata.ErrExists) != r.exists {
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
	s.apply(1, roundTrip(t, "p1", metadata.Put(vhostA), metadata.Put(userU), metadata.Put(permP)))
	s.apply(2, roundTrip(t, "p2", metadata.Put(exchX), metadata.Put(queueQ), metadata.Put(bindB)))
	s.apply(3, roundTrip(t, "p3", metadata.Create(queueQ)))
	s.apply(4, roundTrip(t, "p4", metadata.Put(polP), metadata.Put(opolP)))
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
	e := roundTrip(t, "id", metadata.Create(queueQ), metadata.Del(bindB), metadata.Put(opolP))
	if e.Origin != "o" || e.ID != "id" || len(e.Changes) != 3 || !reflect.DeepEqual(*e.Changes[2].Policy, opolP) ||
		!e.Changes[0].IfAbsent || !reflect.DeepEqual(*e.Changes[0].Queue, queueQ) ||
		!e.Changes[1].Delete || !reflect.DeepEqual(*e.Changes[1].Binding, bindB) {
		t.Fatalf("decoded %+v", e)
	}
	if _, err := encodeEntry(&entry{ID: "x", Changes: []metadata.Change{{}}}); err == nil {
		t.Fatal("empty change encoded")
	}
	if _, err := encodeEntry(&entry{ID: "x", Changes: []metadata.Change{{Vhost: &vhostA, Queue: &queueQ}}}); err == nil {
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
	s.apply(1, roundTrip(t, "p1", metadata.Put(vhostA), metadata.Create(queueQ)))
	old := queueQ
	old.ID = "g0"
	s.apply(2, roundTrip(t, "p2", metadata.Del(old)))
	if got, ok := s.queues[key("a", "q")]; !ok || got.ID != "g1" {
		t.Fatalf("a deletion of an earlier queue took its successor: %+v %v", got, ok)
	}
	s.apply(3, roundTrip(t, "p3", metadata.Del(queueQ)))
	if _, ok := s.queues[key("a", "q")]; ok {
		t.Fatal("a deletion naming the queue's ID left it")
	}
	s.apply(4, roundTrip(t, "p4", metadata.Create(queueQ)))
	s.apply(5, roundTrip(t, "p5", metadata.Del(metadata.Queue{Vhost: "a", Name: "q"})))
	if _, ok := s.queues[key("a", "q")]; ok {
		t.Fatal("a deletion without an ID left the queue")
	}
}
