package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// The RPC workload is RabbitMQ's classic request/reply: on every node a
// client holds a connection with an exclusive, server-named reply queue
// (which lives on that node alone, and which every other node reaches by
// forwarding), publishes requests with confirms to a durable quorum
// queue, and consumes its replies; on every node a server consumes the
// requests, publishes each reply with a confirm (mandatory) to the
// request's reply-to, and acks the request once the reply is confirmed
// (nacks it back into the queue when the reply is nacked).
//
// A client whose connection fails loses its reply queue with whatever
// replies it held, and starts again with a new one: its earlier requests'
// replies are not judged. A client that keeps its connection until the
// end (a clean one) must get a reply to every request the broker
// confirmed, and no reply returned as unroutable: its queue existed from
// before its first request until after the drain.

// rpcQueue is the quorum queue the requests go to.
const rpcQueue = "jepsen-rpc"

// rpcHistory is what the RPC clients and servers saw.
type rpcHistory struct {
	mu       sync.Mutex
	next     uint64
	requests map[uint64]*rpcRequest
	// clients are the client connections, by incarnation number (1, 2,
	// ...): a client's every new connection is a new incarnation.
	clients   map[uint64]*rpcClient
	nextIncar uint64
	// strays are replies delivered with a correlation ID no client
	// handed out.
	strays []string
}

type rpcRequest struct {
	client    uint64 // incarnation that sent it
	sent      time.Time
	confirmed bool
	// replies are the confirmed and the returned reply publishes, each
	// as the serving node and the time.
	confirmedReplies, returnedReplies []string
	deliveries                        []rpcDelivery
}

type rpcDelivery struct {
	to uint64 // incarnation whose queue it came from
	at time.Time
}

type rpcClient struct {
	node, queue string
	// failed is when the connection failed; clean is set when the
	// client closed it at the end.
	failed time.Time
	clean  bool
}

func newRPCHistory() *rpcHistory {
	return &rpcHistory{requests: map[uint64]*rpcRequest{}, clients: map[uint64]*rpcClient{}}
}

func (h *rpcHistory) connected(node, queue string) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nextIncar++
	h.clients[h.nextIncar] = &rpcClient{node: node, queue: queue}
	return h.nextIncar
}

func (h *rpcHistory) ended(incar uint64, clean bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.clients[incar]
	if clean {
		c.clean = true
	} else if c.failed.IsZero() {
		c.failed = time.Now()
	}
}

func (h *rpcHistory) request(incar uint64) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next++
	h.requests[h.next] = &rpcRequest{client: incar, sent: time.Now()}
	return h.next
}

func (h *rpcHistory) requestConfirmed(id uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.requests[id].confirmed = true
}

// replied records a reply publish by node: confirmed, or returned as
// unroutable.
func (h *rpcHistory) replied(id uint64, node string, returned bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.requests[id]
	if r == nil {
		return // a stray request; the delivery of its reply says so
	}
	at := node + "@" + time.Now().Format("15:04:05.000")
	if returned {
		r.returnedReplies = append(r.returnedReplies, at)
	} else {
		r.confirmedReplies = append(r.confirmedReplies, at)
	}
}

func (h *rpcHistory) delivered(correlation string, incar uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	id, err := strconv.ParseUint(correlation, 10, 64)
	r := h.requests[id]
	if err != nil || r == nil {
		h.strays = append(h.strays, fmt.Sprintf("%q to client %d", correlation, incar))
		return
	}
	r.deliveries = append(r.deliveries, rpcDelivery{to: incar, at: time.Now()})
}

// awaiting counts the confirmed requests of clients still connected that
// have no reply yet: the drain waits for them.
func (h *rpcHistory) awaiting() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.requests {
		if c := h.clients[r.client]; r.confirmed && c.failed.IsZero() && len(r.deliveries) == 0 {
			n++
		}
	}
	return n
}

// rpcVerdict is the checker's judgement of the RPC history.
type rpcVerdict struct {
	Requests  int `json:"requests"`
	Confirmed int `json:"confirmed"`
	Answered  int `json:"answered"`
	// Clients counts connections; Clean those kept until the end.
	Clients int `json:"clients"`
	Clean   int `json:"clean"`
	// Repeated replies: a request handed to a second server (its first
	// one's channel went before the ack) is answered again. Counted.
	Repeated int `json:"repeated"`
	// Defects: a reply in another client's queue (Misrouted), with an ID
	// nobody sent (Strays), returned as unroutable while its queue lived
	// (ReturnedLive), or never delivered to a clean client although the
	// broker confirmed the request (Unanswered).
	Misrouted    []uint64 `json:"misrouted"`
	Strays       []string `json:"strays"`
	ReturnedLive []uint64 `json:"returned_live"`
	Unanswered   []uint64 `json:"unanswered"`
	Stories      []string `json:"stories,omitempty"`
}

func (v rpcVerdict) ok() bool {
	return len(v.Misrouted)+len(v.Strays)+len(v.ReturnedLive)+len(v.Unanswered) == 0
}

func (h *rpcHistory) check() rpcVerdict {
	h.mu.Lock()
	defer h.mu.Unlock()
	v := rpcVerdict{Requests: len(h.requests), Clients: len(h.clients), Strays: h.strays}
	for _, c := range h.clients {
		if c.clean {
			v.Clean++
		}
	}
	for id, r := range h.requests {
		clean := h.clients[r.client].clean
		if r.confirmed {
			v.Confirmed++
		}
		if len(r.deliveries) > 0 {
			v.Answered++
		}
		if len(r.deliveries) > 1 {
			v.Repeated++
		}
		if slices.ContainsFunc(r.deliveries, func(d rpcDelivery) bool { return d.to != r.client }) {
			v.Misrouted = append(v.Misrouted, id)
		}
		if clean && len(r.returnedReplies) > 0 {
			v.ReturnedLive = append(v.ReturnedLive, id)
		}
		if clean && r.confirmed && len(r.deliveries) == 0 {
			v.Unanswered = append(v.Unanswered, id)
		}
	}
	for _, ids := range [][]uint64{v.Misrouted, v.ReturnedLive, v.Unanswered} {
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		for i, id := range ids {
			if i == 20 {
				break
			}
			v.Stories = append(v.Stories, h.story(id))
		}
	}
	return v
}

func (h *rpcHistory) story(id uint64) string {
	r := h.requests[id]
	c := h.clients[r.client]
	ts := func(t time.Time) string { return t.Format("15:04:05.000") }
	var b strings.Builder
	fmt.Fprintf(&b, "request %d from client %d (%s, queue %s", id, r.client, c.node, c.queue)
	if !c.failed.IsZero() {
		fmt.Fprintf(&b, ", connection failed at %s", ts(c.failed))
	}
	fmt.Fprintf(&b, ") sent at %s", ts(r.sent))
	if r.confirmed {
		b.WriteString(", confirmed")
	}
	if len(r.confirmedReplies) > 0 {
		fmt.Fprintf(&b, "; reply confirmed by %s", strings.Join(r.confirmedReplies, ", "))
	}
	if len(r.returnedReplies) > 0 {
		fmt.Fprintf(&b, "; reply returned by %s", strings.Join(r.returnedReplies, ", "))
	}
	for _, d := range r.deliveries {
		fmt.Fprintf(&b, "; reply delivered to client %d at %s", d.to, ts(d.at))
	}
	if len(r.deliveries) == 0 {
		b.WriteString("; no reply delivered")
	}
	return b.String()
}

func (v rpcVerdict) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "rpc: %d requests (%d confirmed) from %d client connections (%d kept to the end), %d answered, %d answered twice\n",
		v.Requests, v.Confirmed, v.Clients, v.Clean, v.Answered, v.Repeated)
	fmt.Fprintf(&b, "rpc misrouted replies: %d, stray replies: %d\n", len(v.Misrouted), len(v.Strays))
	fmt.Fprintf(&b, "rpc replies returned unroutable while their queue lived: %d\n", len(v.ReturnedLive))
	fmt.Fprintf(&b, "rpc confirmed requests of connections kept to the end, never answered: %d", len(v.Unanswered))
	for _, s := range v.Strays {
		fmt.Fprintf(&b, "\n  stray reply %s", s)
	}
	for _, s := range v.Stories {
		fmt.Fprintf(&b, "\n  %s", s)
	}
	return b.String()
}

// rpcClientLoop is node nd's RPC client: it sends w.rpcRate requests a
// second while send lasts, and takes replies until stop ends, when it
// closes its connection cleanly.
func (w *workload) rpcClientLoop(send, stop context.Context, nd *node) {
	for stop.Err() == nil {
		conn, ch, err := w.dialConfirm(nd)
		if err != nil {
			sleep(stop, 500*time.Millisecond)
			continue
		}
		closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
		q, err := ch.QueueDeclare("", false, true, true, false, nil)
		var replies <-chan amqp091.Delivery
		if err == nil {
			replies, err = ch.Consume(q.Name, "", true, true, false, false, nil)
		}
		if err != nil {
			conn.Close()
			sleep(stop, 500*time.Millisecond)
			continue
		}
		incar := w.rpc.connected(nd.name, q.Name)
		if clean := w.rpcSession(send, stop, ch, q.Name, incar, replies, closed); clean {
			w.rpc.ended(incar, true)
			conn.Close()
			return
		}
		w.rpc.ended(incar, false)
		conn.Close()
	}
}

// rpcSession runs one client connection until it fails (false) or stop
// ends (true).
func (w *workload) rpcSession(send, stop context.Context, ch *amqp091.Channel, queue string, incar uint64, replies <-chan amqp091.Delivery, closed <-chan *amqp091.Error) bool {
	pending, _ := awaitConfirms(1024, w.rpc.requestConfirmed)
	defer close(pending)
	tick := time.NewTicker(time.Second / time.Duration(w.rpcRate))
	defer tick.Stop()
	for {
		select {
		case <-stop.Done():
			return true
		case <-closed:
			return false
		case d, ok := <-replies:
			if !ok {
				return false
			}
			w.rpc.delivered(d.CorrelationId, incar)
		case <-tick.C:
			if send.Err() != nil {
				continue
			}
			id := w.rpc.request(incar)
			body := strconv.FormatUint(id, 10)
			dc, err := ch.PublishWithDeferredConfirmWithContext(send, "", rpcQueue, false, false, amqp091.Publishing{
				DeliveryMode: amqp091.Persistent, ReplyTo: queue, CorrelationId: body, Body: []byte(body),
			})
			if err != nil {
				if send.Err() != nil {
					continue
				}
				return false
			}
			pending <- confirmWait{id, dc}
		}
	}
}

// rpcServerLoop is node nd's RPC server, until ctx ends.
func (w *workload) rpcServerLoop(ctx context.Context, nd *node) {
	for ctx.Err() == nil {
		conn, ch, err := w.dialConfirm(nd)
		if err == nil {
			err = ch.Qos(8, 0, false)
		}
		var requests <-chan amqp091.Delivery
		if err == nil {
			requests, err = ch.ConsumeWithContext(ctx, rpcQueue, "", false, false, false, false, nil)
		}
		if err != nil {
			if conn != nil {
				conn.Close()
			}
			sleep(ctx, 500*time.Millisecond)
			continue
		}
		returns := ch.NotifyReturn(make(chan amqp091.Return, 64))
		for d := range requests {
			if !w.serve(ctx, ch, nd, d, returns) {
				break
			}
		}
		conn.Close()
	}
}

// serve answers one request; false when the channel can no longer be
// used.
func (w *workload) serve(ctx context.Context, ch *amqp091.Channel, nd *node, d amqp091.Delivery, returns <-chan amqp091.Return) bool {
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", d.ReplyTo, true, false, amqp091.Publishing{
		CorrelationId: d.CorrelationId, Body: d.Body,
	})
	if err != nil {
		return false
	}
	wctx, cancel := context.WithTimeout(ctx, 40*time.Second)
	defer cancel()
	acked, err := dc.WaitContext(wctx)
	if err != nil {
		return false
	}
	if !acked {
		return d.Nack(false, true) == nil
	}
	// A return comes before its publish's confirm, and this server has
	// one reply in flight at a time.
	returned := false
	for len(returns) > 0 {
		if r := <-returns; r.CorrelationId == d.CorrelationId {
			returned = true
		}
	}
	if id, err := strconv.ParseUint(d.CorrelationId, 10, 64); err == nil {
		w.rpc.replied(id, nd.name, returned)
	}
	return d.Ack(false) == nil
}
