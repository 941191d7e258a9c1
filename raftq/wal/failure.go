package wal

// A write or sync that fails (ENOSPC, EIO) leaves the log's files in a
// state it cannot vouch for past the last successful sync, so it takes no
// more writes. What was synced before stays, and a restart replays it
// (the failed write's bytes are a torn tail at worst).
//
// The node is to stop then, cleanly. hashicorp/raft panics when it cannot
// save a term or a vote, which a failed write would otherwise make it do
// on some goroutine while the node is still stopping. So, with
// Options.OnFailure set, writes after the failure (and those of the
// failing batch) never return: raft sees no error, and the node, told by
// OnFailure, closes its clients' connections and exits. Closing the log
// does not release them either, since raft would panic on the error then.

// failedNow tells OnFailure, once; mu is held.
func (l *Log) failedNow(err error) {
	if l.onFailure != nil {
		go l.onFailure(err)
	}
}

// holdFailed is what a write refused for an earlier failure returns: at
// once without OnFailure; with it, never (the process is exiting).
func (l *Log) holdFailed(err error) error {
	if l.onFailure != nil {
		select {}
	}
	return err
}

// answerFailed answers a request of the batch whose write failed; with
// OnFailure, never.
func (l *Log) answerFailed(r *request, err error) {
	if l.onFailure == nil {
		r.done <- err
	}
}
