package forward

import "time"

// warnPace keeps a warning that could repeat for every publish to one
// line per warnPaceEvery. A queue whose node is gone nacks each publish at
// once, and a client that publishes on regardless (an RPC server answering
// into a dead node's reply queue, in a chaos run) had the node write more
// than a thousand identical lines a second. The line that goes says how
// many the lines held back would have counted, so no count is lost.
type warnPace struct {
	last time.Time // when the last line went; zero before the first
	held int       // counted since then without a line
}

const warnPaceEvery = 10 * time.Second

// add counts n at now and reports whether a line goes for them, and if
// so how many were held back before them (since the previous line).
func (w *warnPace) add(now time.Time, n int) (heldBack int, log bool) {
	if !w.last.IsZero() && now.Sub(w.last) < warnPaceEvery {
		w.held += n
		return 0, false
	}
	heldBack, w.held, w.last = w.held, 0, now
	return heldBack, true
}
