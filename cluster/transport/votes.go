package transport

import (
	"strconv"

	"github.com/hashicorp/raft"
)

// Votes are judged on terms and logs, as Raft has them.
//
// hashicorp/raft refuses a vote, and a pre-vote, to a candidate that the
// voter's own latest configuration does not list as a voter, before it
// looks at terms and logs. Raft has no such rule: servers answer requests
// without consulting their configurations (Ongaro's thesis, 4.1). A vote
// is safe whatever the voter's configuration says, since the candidate
// counts its votes against its own, and a candidate whose log lacks a
// committed entry is refused on the log comparison by enough voters that
// it cannot win. The check costs liveness when a voter's configuration is
// behind. A member stopped while another was promoted keeps one where the
// promoted member does not vote; should the leader then fail, that
// member, whose log is ahead and which alone can win, is refused by the
// restarted one, which cannot win either, and two live members of three
// wait for the third (jepsen/README.md's findings).
//
// So a RequestVote reaches raft without the candidate's ID, which makes
// raft skip both checks (its path for peers of older protocol versions),
// and a pre-vote from a candidate that this member's configuration does
// not count as a voter is answered here, as raft answers a voter's.

// JudgeVotesOf sets the group's raft, whose state answers pre-votes from
// candidates its configuration does not count as voters.
func (t *Transport) JudgeVotesOf(r *raft.Raft) { t.judge.Store(r) }

// answerPreVote answers req as raft would if its configuration counted
// the candidate as a voter; ok is false when raft should answer: the
// candidate is a voter there, the configuration is empty (raft grants
// while a group bootstraps), or this member leads (raft refuses, and
// notes the question: a follower asking has not heard from its leader).
func (t *Transport) answerPreVote(req *raft.RequestPreVoteRequest) (resp *raft.RequestPreVoteResponse, ok bool) {
	r := t.judge.Load()
	if r == nil || r.State() == raft.Leader || r.State() == raft.Shutdown {
		return nil, false
	}
	servers := r.GetConfiguration().Configuration().Servers
	if len(servers) == 0 {
		return nil, false
	}
	for _, s := range servers {
		if string(s.ID) == string(req.ID) && s.Suffrage == raft.Voter {
			return nil, false
		}
	}
	stats := r.Stats()
	num := func(key string) uint64 {
		v, _ := strconv.ParseUint(stats[key], 10, 64)
		return v
	}
	term := num("term")
	resp = &raft.RequestPreVoteResponse{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, Addr: []byte(t.LocalAddr())},
		Term:      term,
	}
	if addr, _ := r.LeaderWithID(); addr != "" && addr != t.DecodePeer(req.Addr) {
		return resp, true // it follows another leader
	}
	if req.Term < term {
		return resp, true
	}
	resp.Term = max(term, req.Term)
	idx, last := num("last_log_index"), num("last_log_term")
	if si := num("last_snapshot_index"); si > idx {
		idx, last = si, num("last_snapshot_term")
	}
	resp.Granted = req.LastLogTerm > last || req.LastLogTerm == last && req.LastLogIndex >= idx
	return resp, true
}
