package raftlog

import (
	"fmt"
	"regexp"
	"sync"
	"time"
)

// When a node dies, every group with a member there logs each failed
// heartbeat, append and vote to it, with raft's backoff between retries:
// a node leading a few hundred queues wrote nearly 400 lines a second
// for as long as the peer was down, the same few lines about the same
// peer. Lines about failing to reach a peer are therefore shared by every
// group in the process: the first of each kind for each peer is written,
// the rest are counted, and after quietPeriod the next one is written
// with the count of those left out ("similar").

// quietPeriod is how often a line of one kind about one peer is written.
const quietPeriod = 10 * time.Second

// peerTroubles are the beginnings of raft's lines about a peer that
// cannot be reached.
var peerTroubles = []string{
	"failed to heartbeat to",
	"failed to appendEntries to",
	"failed to make requestVote RPC",
	"failed to make requestPreVote RPC",
	"failed to pipeline appendEntries",
	"failed to contact:", // one follower; not "failed to contact quorum"
	"failed to send snapshot to",
}

// peerField finds the peer a line is about.
var peerField = regexp.MustCompile(`(?:peer|target|server-id)=("[^"]*"|\S+)`)

// quieter decides which peer-trouble lines are written.
type quieter struct {
	now func() time.Time

	mu   sync.Mutex
	last map[string]*quietState
}

type quietState struct {
	written time.Time
	left    int // lines not written since
}

// shared is the process's quieter: the groups' lines about one peer are
// the same trouble.
var shared = newQuieter(time.Now)

func newQuieter(now func() time.Time) *quieter {
	return &quieter{now: now, last: make(map[string]*quietState)}
}

// filter returns the line to write, with the count of similar lines left
// out since the last one, or false to leave it out. Other lines pass
// unchanged.
func (q *quieter) filter(msg string) (string, bool) {
	kind := kindOf(msg, peerTroubles)
	if kind == "" {
		return msg, true
	}
	key := kind
	if m := peerField.FindStringSubmatch(msg); m != nil {
		key += " " + m[1]
	}
	now := q.now()
	q.mu.Lock()
	defer q.mu.Unlock()
	st := q.last[key]
	if st == nil {
		if len(q.last) > 4096 { // peers come and go; forget old ones
			clear(q.last)
		}
		q.last[key] = &quietState{written: now}
		return msg, true
	}
	if now.Sub(st.written) < quietPeriod {
		st.left++
		return "", false
	}
	left := st.left
	st.written, st.left = now, 0
	if left > 0 {
		msg = fmt.Sprintf("%s similar=%d", msg, left)
	}
	return msg, true
}
