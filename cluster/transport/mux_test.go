package transport

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/raftq/testwait"
)

// Tests of the transport alone: two nodes, no raft, a test goroutine
// answering on Consumer.

// pair returns the transports of group g on two nodes, a and b.
func pair(t *testing.T, g string) (h *harness, ta, tb *Transport) {
	t.Helper()
	h = newHarness(t, 2, nil, nil)
	ta, err := h.nodes[0].mux.Transport(g)
	if err != nil {
		t.Fatal(err)
	}
	tb, err = h.nodes[1].mux.Transport(g)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ta.Close(); _ = tb.Close() })
	return h, ta, tb
}

// answer serves tb's Consumer with fn until the test ends.
func answer(t *testing.T, tb *Transport, fn func(raft.RPC)) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		for {
			select {
			case rpc := <-tb.Consumer():
				fn(rpc)
			case <-ctx.Done():
				return
			}
		}
	}()
}

func TestPipelineInOrder(t *testing.T) {
	t.Parallel()
	h, ta, tb := pair(t, "p")
	b := h.nodes[1]
	got := make(chan *raft.AppendEntriesRequest, 1)
	answer(t, tb, func(rpc raft.RPC) {
		req := rpc.Command.(*raft.AppendEntriesRequest)
		if req.PrevLogEntry == 1 {
			got <- req
		}
		rpc.Respond(&raft.AppendEntriesResponse{Term: req.Term, LastLog: req.PrevLogEntry + uint64(len(req.Entries)), Success: true}, nil)
	})

	p, err := ta.AppendEntriesPipeline(b.id, raft.ServerAddress(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const n = 100
	appended := time.Now()
	go func() {
		for i := uint64(1); i <= n; i++ {
			req := &raft.AppendEntriesRequest{
				RPCHeader:    raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("n0"), Addr: []byte(ta.LocalAddr())},
				Term:         3,
				PrevLogEntry: i,
				PrevLogTerm:  2,
				Entries: []*raft.Log{{Index: i + 1, Term: 3, Type: raft.LogCommand, Data: []byte("body"),
					Extensions: []byte("ext"), AppendedAt: appended}},
				LeaderCommitIndex: i,
			}
			if _, err := p.AppendEntries(req, new(raft.AppendEntriesResponse)); err != nil {
				t.Errorf("AppendEntries %d: %v", i, err)
				return
			}
		}
	}()
	for i := uint64(1); i <= n; i++ {
		select {
		case f := <-p.Consumer():
			if err := f.Error(); err != nil {
				t.Fatalf("future %d: %v", i, err)
			}
			if f.Request().PrevLogEntry != i || f.Response().LastLog != i+1 || !f.Response().Success {
				t.Fatalf("future %d out of order: request %d, response %+v", i, f.Request().PrevLogEntry, f.Response())
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("future %d did not come", i)
		}
	}

	req := <-got
	e := req.Entries[0]
	if req.Term != 3 || req.PrevLogTerm != 2 || req.LeaderCommitIndex != 1 || string(req.ID) != "n0" ||
		req.ProtocolVersion != raft.ProtocolVersionMax || string(req.Addr) != string(ta.LocalAddr()) ||
		e.Index != 2 || e.Term != 3 || e.Type != raft.LogCommand || string(e.Data) != "body" ||
		string(e.Extensions) != "ext" || !e.AppendedAt.Equal(appended) {
		t.Fatalf("request changed in transit: %+v, entry %+v", req, e)
	}
}

// A heartbeat is answered by the heartbeat handler while the group's
// Consumer is not read at all.
func TestHeartbeatFastPath(t *testing.T) {
	t.Parallel()
	h, ta, tb := pair(t, "hb")
	b := h.nodes[1]
	tb.SetHeartbeatHandler(func(rpc raft.RPC) {
		rpc.Respond(&raft.AppendEntriesResponse{Term: 7, Success: true}, nil)
	})
	var resp raft.AppendEntriesResponse
	hb := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{Addr: []byte(ta.LocalAddr())}, Term: 7}
	if err := ta.AppendEntries(b.id, raft.ServerAddress(b.addr), hb, &resp); err != nil {
		t.Fatal(err)
	}
	if !resp.Success || resp.Term != 7 {
		t.Fatalf("heartbeat response %+v", resp)
	}

	// Anything else waits for Consumer.
	done := make(chan error, 1)
	go func() {
		req := &raft.AppendEntriesRequest{Term: 7, Leader: []byte(ta.LocalAddr()), LeaderCommitIndex: 1}
		done <- ta.AppendEntries(b.id, raft.ServerAddress(b.addr), req, new(raft.AppendEntriesResponse))
	}()
	select {
	case rpc := <-tb.Consumer():
		rpc.Respond(&raft.AppendEntriesResponse{Term: 7}, nil)
	case <-time.After(10 * time.Second):
		t.Fatal("append entries never reached Consumer")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Close waits for a heartbeat the fast path is handling, and none is
// handed to it after: raft's Shutdown closes the transport and returns,
// and the group's stores are closed next, under a heartbeat still writing
// the term (hashicorp/raft panicked: "failed to save current term:
// database not open").
func TestCloseWaitsForHeartbeatInProgress(t *testing.T) {
	t.Parallel()
	h, ta, tb := pair(t, "hbclose")
	b := h.nodes[1]
	entered, release := make(chan struct{}), make(chan struct{})
	var after atomic.Bool
	var closed atomic.Bool
	tb.SetHeartbeatHandler(func(rpc raft.RPC) {
		if closed.Load() {
			after.Store(true)
		}
		select {
		case entered <- struct{}{}:
			<-release
		default:
		}
		rpc.Respond(&raft.AppendEntriesResponse{Term: 7, Success: true}, nil)
	})
	hb := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{Addr: []byte(ta.LocalAddr())}, Term: 7}
	go ta.AppendEntries(b.id, raft.ServerAddress(b.addr), hb, new(raft.AppendEntriesResponse))
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the heartbeat never reached the handler")
	}
	closeDone := make(chan struct{})
	go func() {
		tb.Close()
		closed.Store(true)
		close(closeDone)
	}()
	select {
	case <-closeDone:
		t.Fatal("Close returned while a heartbeat was being handled")
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	select {
	case <-closeDone:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return once the heartbeat was handled")
	}
	// After Close, heartbeats are refused without reaching the handler.
	resp := tb.in.dispatchHeartbeat(context.Background(), hb)
	if r := <-resp; r.Error == nil || after.Load() {
		t.Fatalf("a heartbeat after Close: %+v, handled %v", r, after.Load())
	}
}

// The snapshot reaches raft as it arrives: the server side hands raft its
// reader and the first chunk before the sender has the rest.
func TestSnapshotStreams(t *testing.T) {
	t.Parallel()
	h, ta, tb := pair(t, "s")
	b := h.nodes[1]
	size := 3*snapshotChunk + 5
	want := bytes.Repeat([]byte("0123456789abcdef"), size/16+1)[:size]
	firstChunk := make(chan struct{})
	answer(t, tb, func(rpc raft.RPC) {
		req := rpc.Command.(*raft.InstallSnapshotRequest)
		buf := make([]byte, snapshotChunk)
		if _, err := io.ReadFull(rpc.Reader, buf); err != nil {
			rpc.Respond(nil, err)
			return
		}
		close(firstChunk)
		rest, err := io.ReadAll(rpc.Reader)
		got := append(buf, rest...)
		ok := err == nil && int64(len(got)) == req.Size && bytes.Equal(got, want) && req.LastLogIndex == 42
		rpc.Respond(&raft.InstallSnapshotResponse{Term: req.Term, Success: ok}, err)
	})

	pr, pw := io.Pipe()
	go func() {
		if _, err := pw.Write(want[:snapshotChunk]); err != nil {
			return
		}
		select {
		case <-firstChunk:
		case <-time.After(10 * time.Second):
			pw.CloseWithError(io.ErrNoProgress)
			return
		}
		_, _ = pw.Write(want[snapshotChunk:])
		pw.Close()
	}()
	req := &raft.InstallSnapshotRequest{SnapshotVersion: raft.SnapshotVersionMax, Term: 2, Leader: []byte(ta.LocalAddr()),
		LastLogIndex: 42, LastLogTerm: 2, Configuration: []byte("conf"), ConfigurationIndex: 40, Size: int64(size)}
	var resp raft.InstallSnapshotResponse
	if err := ta.InstallSnapshot(b.id, raft.ServerAddress(b.addr), req, &resp, pr); err != nil {
		t.Fatal(err)
	}
	if !resp.Success || resp.Term != 2 {
		t.Fatalf("response %+v", resp)
	}
}

// A pipeline's stream ends once idle, on both nodes, and the next
// AppendEntries opens another: answers stay in order across the change.
func TestPipelineStreamEndsWhenIdle(t *testing.T) {
	t.Parallel()
	ta, b, p := answeredPipeline(t, "idle", func(req *raft.AppendEntriesRequest) *raft.AppendEntriesResponse {
		return &raft.AppendEntriesResponse{Term: req.Term, LastLog: req.PrevLogEntry + 1, Success: true}
	})
	p.idleAfter = 100 * time.Millisecond
	send := func(i uint64) {
		t.Helper()
		if _, err := p.AppendEntries(oneEntry(ta, i), new(raft.AppendEntriesResponse)); err != nil {
			t.Fatalf("AppendEntries %d: %v", i, err)
		}
		select {
		case f := <-p.Consumer():
			if err := f.Error(); err != nil || f.Response().LastLog != i+1 {
				t.Fatalf("future %d: %v, %+v", i, err, f.Response())
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("future %d did not come", i)
		}
	}
	open := func() (client bool, served int64) {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.stream != nil, b.mux.pipelinesServing.Load()
	}
	for round := uint64(1); round <= 3; round++ {
		for i := range uint64(5) {
			send(round*10 + i)
		}
		if c, s := open(); !c || s != 1 {
			t.Fatalf("round %d: stream open %v, served %d; want open, 1", round, c, s)
		}
		testwait.ForNil(t, 5*time.Second, fmt.Sprintf("round %d: the idle stream closed", round), func() error {
			if c, s := open(); c || s != 0 {
				return fmt.Errorf("still open %v, served %d", c, s)
			}
			return nil
		})
	}
}

// raft's decoder stops reading Consumer when a response fails, and raft
// closes the pipeline only once its sender notices. A sender that sends
// twice more meanwhile must get an error, not wait for ever (which hung
// raft.Shutdown).
func TestPipelineAbandonedByDecoder(t *testing.T) {
	t.Parallel()
	ta, _, p := answeredPipeline(t, "abandoned", func(req *raft.AppendEntriesRequest) *raft.AppendEntriesResponse {
		return &raft.AppendEntriesResponse{Term: req.Term, Success: false}
	})
	p.consumerWait = 200 * time.Millisecond
	if _, err := p.AppendEntries(oneEntry(ta, 1), new(raft.AppendEntriesResponse)); err != nil {
		t.Fatal(err)
	}
	<-p.Consumer() // the decoder takes the failed answer and stops reading
	done := make(chan error, 1)
	go func() {
		var err error
		for i := uint64(2); err == nil && i < 10; i++ {
			_, err = p.AppendEntries(oneEntry(ta, i), new(raft.AppendEntriesResponse))
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("sends kept succeeding with nobody reading the answers")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("AppendEntries blocked with nobody reading the answers")
	}
}

// answeredPipeline opens a pipeline of group g from node a to node b,
// whose AppendEntries respond answers; it returns a's transport, b and
// the pipeline.
func answeredPipeline(t *testing.T, g string, respond func(*raft.AppendEntriesRequest) *raft.AppendEntriesResponse) (*Transport, *node, *pipeline) {
	t.Helper()
	h, ta, tb := pair(t, g)
	b := h.nodes[1]
	answer(t, tb, func(rpc raft.RPC) {
		rpc.Respond(respond(rpc.Command.(*raft.AppendEntriesRequest)), nil)
	})
	return ta, b, openPipeline(t, ta, b)
}

// openPipeline opens ta's pipeline to b, closed when the test ends.
func openPipeline(t *testing.T, ta *Transport, b *node) *pipeline {
	t.Helper()
	rp, err := ta.AppendEntriesPipeline(b.id, raft.ServerAddress(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rp.Close() })
	return rp.(*pipeline)
}

// oneEntry is an AppendEntries from ta's node carrying entry i+1.
func oneEntry(ta *Transport, i uint64) *raft.AppendEntriesRequest {
	return &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, Addr: []byte(ta.LocalAddr())},
		Term:      1, PrevLogEntry: i, Entries: []*raft.Log{{Index: i + 1, Term: 1, Type: raft.LogCommand}},
	}
}
