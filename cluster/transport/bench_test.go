package transport

import (
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/warrenmq/warren/proto/raftpb"
)

// The AppendEntries conversions carry every message body of every queue.
func BenchmarkAppendEntriesEncode(b *testing.B) {
	req := &raft.AppendEntriesRequest{Term: 3, PrevLogEntry: 100, PrevLogTerm: 3, LeaderCommitIndex: 99}
	for i := range 64 {
		req.Entries = append(req.Entries, &raft.Log{Index: uint64(101 + i), Term: 3, Type: raft.LogCommand, Data: make([]byte, 1024)})
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := proto.Marshal(appendReqToPB("q", req)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendEntriesDecode(b *testing.B) {
	req := &raft.AppendEntriesRequest{Term: 3, PrevLogEntry: 100, PrevLogTerm: 3, LeaderCommitIndex: 99}
	for i := range 64 {
		req.Entries = append(req.Entries, &raft.Log{Index: uint64(101 + i), Term: 3, Type: raft.LogCommand, Data: make([]byte, 1024)})
	}
	wire, err := proto.Marshal(appendReqToPB("q", req))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		var m raftpb.AppendEntriesRequest
		if err := proto.Unmarshal(wire, &m); err != nil {
			b.Fatal(err)
		}
		_ = appendReqFromPB(&m)
	}
}
