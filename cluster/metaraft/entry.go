package metaraft

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/warrenmq/warren/cluster/catalog"
)

// Log entry opcodes. ONLY ADD TO THE END: a replica meeting an opcode it
// does not know stops (panics) rather than diverge from its peers.
const (
	opChanges byte = 1 // entry: one atomic batch of metadata changes
)

// entry is one proposal: the changes of one Apply call.
type entry struct {
	// Origin is the proposing process run's Store.Origin().
	Origin string
	// ID is random per proposal; a retried proposal keeps it, so a
	// second commit of the same proposal is recognised.
	ID      string
	Changes []catalog.Change
}

// wireEntry and wireChange fix the JSON field names of the log, so that
// renaming a Go field in package catalog cannot change what old logs
// mean. The records themselves use their own JSON tags (as BoltStore
// does); []byte fields (encoded AMQP tables) travel as base64, exactly.
type wireEntry struct {
	Origin  string       `json:"origin"`
	ID      string       `json:"id"`
	Changes []wireChange `json:"changes"`
}

type wireChange struct {
	Delete     bool                `json:"delete,omitempty"`
	IfAbsent   bool                `json:"if_absent,omitempty"`
	Vhost      *catalog.Vhost      `json:"vhost,omitempty"`
	User       *catalog.User       `json:"user,omitempty"`
	Permission *catalog.Permission `json:"permission,omitempty"`
	Exchange   *catalog.Exchange   `json:"exchange,omitempty"`
	Binding    *catalog.Binding    `json:"binding,omitempty"`
	Queue      *catalog.Queue      `json:"queue,omitempty"`
	Policy     *catalog.Policy     `json:"policy,omitempty"`
	Node       *catalog.Node       `json:"node,omitempty"`
}

var errEmptyChange = errors.New("meta: a change must hold exactly one record")

// records counts the records a change holds: exactly one is valid.
func records(c *catalog.Change) int {
	n := 0
	for _, set := range []bool{c.Vhost != nil, c.User != nil, c.Permission != nil, c.Exchange != nil, c.Binding != nil, c.Queue != nil, c.Policy != nil, c.Node != nil} {
		if set {
			n++
		}
	}
	return n
}

func encodeEntry(e *entry) ([]byte, error) {
	w := wireEntry{Origin: e.Origin, ID: e.ID, Changes: make([]wireChange, len(e.Changes))}
	for i := range e.Changes {
		c := &e.Changes[i]
		if records(c) != 1 {
			return nil, fmt.Errorf("%w (change %d)", errEmptyChange, i)
		}
		w.Changes[i] = wireChange{
			Delete: c.Delete, IfAbsent: c.IfAbsent,
			Vhost: c.Vhost, User: c.User, Permission: c.Permission,
			Exchange: c.Exchange, Binding: c.Binding, Queue: c.Queue, Policy: c.Policy, Node: c.Node,
		}
	}
	payload, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("meta: encode entry: %w", err)
	}
	return append([]byte{opChanges}, payload...), nil
}

// decodeEntry decodes and checks an entry. The records it returns are
// fresh: the caller owns them.
func decodeEntry(data []byte) (*entry, error) {
	if len(data) == 0 {
		return nil, errors.New("meta: empty entry")
	}
	if data[0] != opChanges {
		return nil, fmt.Errorf("meta: unknown entry opcode %d", data[0])
	}
	var w wireEntry
	if err := json.Unmarshal(data[1:], &w); err != nil {
		return nil, fmt.Errorf("meta: decode entry: %w", err)
	}
	e := &entry{Origin: w.Origin, ID: w.ID, Changes: make([]catalog.Change, len(w.Changes))}
	for i, c := range w.Changes {
		e.Changes[i] = catalog.Change{
			Delete: c.Delete, IfAbsent: c.IfAbsent,
			Vhost: c.Vhost, User: c.User, Permission: c.Permission,
			Exchange: c.Exchange, Binding: c.Binding, Queue: c.Queue, Policy: c.Policy, Node: c.Node,
		}
		if records(&e.Changes[i]) != 1 {
			return nil, fmt.Errorf("%w (change %d)", errEmptyChange, i)
		}
	}
	if e.ID == "" {
		return nil, errors.New("meta: entry without a proposal ID")
	}
	return e, nil
}
