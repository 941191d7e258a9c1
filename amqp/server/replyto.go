package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/warrenmq/warren/raftq/queue"
)

// Direct reply-to (amq.rabbitmq.reply-to). A requester consumes from the
// pseudo-queue with no-ack and publishes with reply_to set to it; the
// broker rewrites reply_to to a name of the requester's reply consumer,
// amq.rabbitmq.reply-to.NODE.ID, and a publish to the default exchange
// with that name as routing key goes straight to the consumer. NODE names
// the requester's node, so that a responder connected to any node of the
// cluster reaches it: a reply for another node's requester is relayed
// there (ReplyRelay), as RabbitMQ's reply names carry the requester
// channel's node and process wherever the responder publishes.

// replyToQueue is the pseudo-queue of direct reply-to.
const replyToQueue = "amq.rabbitmq.reply-to"

// replyRelayTimeout bounds one reply's relay to another node: a responder
// waits this long at most for a requester's node that does not answer.
const replyRelayTimeout = 2 * time.Second

func isReplyName(name string) bool {
	return strings.HasPrefix(name, replyToQueue+".")
}

// ReplyRelay carries direct reply-to replies to requesters on other
// nodes (the cluster's forward service).
type ReplyRelay interface {
	// RelayReply hands m to the reply consumer name names on node, or
	// with m nil asks whether it lives; false if it does not, or if node
	// cannot be reached.
	RelayReply(ctx context.Context, node, name string, m *queue.Message) (bool, error)
	// Running reports whether node is a member of the cluster that is
	// up: a reply name of such a node routes (RabbitMQ 4.3's rule).
	Running(node string) bool
}

// SetReplyRelay lets replies to other nodes' requesters through r;
// without one (a standalone node) they are unroutable.
func (s *Server) SetReplyRelay(r ReplyRelay) { s.relay.Store(&r) }

// DeliverReply hands m to this node's reply consumer that name names, or
// with m nil reports whether it lives: what another node's RelayReply
// reaches.
func (s *Server) DeliverReply(name string, m *queue.Message) bool {
	k := s.replies.lookup(name)
	if k == nil {
		return false
	}
	if m != nil {
		k.Deliver(queue.Delivery{Message: m})
	}
	return true
}

// relayReplies hands m to the reply consumers that names name on other
// nodes and returns how many took it.
func (s *Server) relayReplies(names []string, m *queue.Message) int {
	r := s.relay.Load()
	if r == nil {
		return 0
	}
	n := 0
	for _, name := range names {
		node, _ := s.replies.nodeOf(name)
		ctx, cancel := context.WithTimeout(context.Background(), replyRelayTimeout)
		ok, err := (*r).RelayReply(ctx, node, name, m)
		cancel()
		if err != nil {
			s.log.Warn("direct reply-to: reply not relayed to the requester's node", "node", node, "err", err)
		}
		if ok {
			n++
		}
	}
	return n
}

// replyNodeRunning reports whether a reply name of another node names
// one that is up (ReplyRelay.Running); never on a standalone node.
func (s *Server) replyNodeRunning(node string) bool {
	r := s.relay.Load()
	return r != nil && (*r).Running(node)
}

// replyLives reports whether the reply consumer that name names lives,
// here or on its node.
func (s *Server) replyLives(name string) bool {
	if s.replies.lookup(name) != nil {
		return true
	}
	if _, ok := s.replies.nodeOf(name); !ok || s.replies.isLocal(name) {
		return false
	}
	return s.relayReplies([]string{name}, nil) == 1
}

// replyRegistry maps the IDs of rewritten reply_to names to the live
// reply consumers of this node's channels.
type replyRegistry struct {
	tag string // this node's name as reply names carry it (nodeTag), set by New

	mu sync.Mutex
	m  map[string]*consumer
}

// nodeTag is how a reply name carries a node's name: in base64url, which
// has no dot.
func nodeTag(node string) string { return base64.RawURLEncoding.EncodeToString([]byte(node)) }

func (r *replyRegistry) add(k *consumer) {
	var id [18]byte
	rand.Read(id[:])
	k.token = r.tag + "." + base64.RawURLEncoding.EncodeToString(id[:])
	r.mu.Lock()
	if r.m == nil {
		r.m = make(map[string]*consumer)
	}
	r.m[k.token] = k
	r.mu.Unlock()
}

func (r *replyRegistry) remove(k *consumer) {
	r.mu.Lock()
	if r.m[k.token] == k {
		delete(r.m, k.token)
	}
	r.mu.Unlock()
}

// nodeOf is the node a reply name names.
func (r *replyRegistry) nodeOf(name string) (string, bool) {
	token, ok := strings.CutPrefix(name, replyToQueue+".")
	if !ok {
		return "", false
	}
	tag, _, ok := strings.Cut(token, ".")
	if !ok {
		return "", false
	}
	node, err := base64.RawURLEncoding.DecodeString(tag)
	if err != nil || len(node) == 0 {
		return "", false
	}
	return string(node), true
}

// isLocal reports whether a reply name names one of this node's reply
// consumers, live or not.
func (r *replyRegistry) isLocal(name string) bool {
	return strings.HasPrefix(name, replyToQueue+"."+r.tag+".")
}

// replyRoute is where a publish's reply names lead.
type replyRoute struct {
	local  []*consumer // this node's live reply consumers
	remote []string    // names of reply consumers on other running nodes (relayReplies)
	// targets counts the reply names that route: as in RabbitMQ 4.2 and
	// later, a reply name of a running node of the cluster is a target
	// whether its requester is still there or not (a reply to one that
	// has gone is dropped, and a mandatory one is not returned); one of
	// an unknown or stopped node is unroutable.
	targets int
}

// deliver hands m to the reply consumers: this node's, and other nodes'
// through the relay.
func (rr replyRoute) deliver(s *Server, m *queue.Message) {
	if len(rr.remote) > 0 {
		s.relayReplies(rr.remote, m)
	}
	for _, k := range rr.local {
		k.Deliver(queue.Delivery{Message: m})
	}
}

// route sorts the reply names among routing keys of a publish to the
// default exchange, once each; running says whether another node is up.
func (r *replyRegistry) route(keys []string, running func(node string) bool) replyRoute {
	var rr replyRoute
	var seen []string
	for _, key := range keys {
		if !isReplyName(key) || slices.Contains(seen, key) {
			continue
		}
		seen = append(seen, key)
		if r.isLocal(key) {
			rr.targets++
			if k := r.lookup(key); k != nil && !slices.Contains(rr.local, k) {
				rr.local = append(rr.local, k)
			}
			continue
		}
		if node, ok := r.nodeOf(key); ok && running(node) {
			rr.targets++
			rr.remote = append(rr.remote, key)
		}
	}
	return rr
}

func (r *replyRegistry) lookup(name string) *consumer {
	token, ok := strings.CutPrefix(name, replyToQueue+".")
	if !ok {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[token]
}
