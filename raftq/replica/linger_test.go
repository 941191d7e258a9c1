package replica

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/raftq/linger"
	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/testwait"
)

// openLingering opens a one-member replica on the node's shared log that
// holds publishes for linger (0: none).
func openLingering(t *testing.T, n *testNode, linger time.Duration) *Replica {
	t.Helper()
	return openLingeringShare(t, n, linger, 0)
}

// openLingeringShare is openLingering with Config.PublishLingerShare.
func openLingeringShare(t *testing.T, n *testNode, linger time.Duration, share float64) *Replica {
	t.Helper()
	return openLingeringBatch(t, n, linger, share, 0)
}

// openLingeringBatch is openLingeringShare with Config.PublishLingerBatch.
func openLingeringBatch(t *testing.T, n *testNode, linger time.Duration, share float64, batch int) *Replica {
	t.Helper()
	cfg := Config{
		Name: "test/q", Dir: t.TempDir(), NodeID: "n1", Created: 1,
		Log:           slog.New(slog.NewTextHandler(io.Discard, nil)),
		PublishLinger: linger, PublishLingerShare: share, PublishLingerBatch: batch,
	}
	n.configure(&cfg)
	r, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// startPublish enqueues body and returns a channel that gets its answer.
func startPublish(t *testing.T, r *Replica, body string) <-chan error {
	t.Helper()
	answer := make(chan error, 1)
	msg := &queue.Message{RoutingKey: "q", Body: []byte(body)}
	if err := r.Enqueue(context.Background(), msg, func(err error) { answer <- err }); err != nil {
		t.Fatalf("enqueue %s: %v", body, err)
	}
	return answer
}

func await(t *testing.T, what string, answer <-chan error) error {
	t.Helper()
	select {
	case err := <-answer:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no answer after 10 s", what)
		return nil
	}
}

// Publishes arriving a little apart, each sent without waiting for the
// one before (a rate-limited publisher with a confirm window), share log
// writes: the node's log syncs several times fewer than without the
// linger, and every publish is confirmed and stored once.
func TestLingerBatchesSteadyPublishes(t *testing.T) {
	const n, gap = 100, 2 * time.Millisecond
	syncs := func(linger time.Duration) uint64 {
		node := sharedLog.node(t)
		r := openLingering(t, node, linger)
		<-startPublish(t, r, "warm-up")
		got := publishSteadily(t, node, r, n, gap)
		if st := r.Stats(); st.Ready != n+1 {
			t.Fatalf("linger %v: %d messages stored, want %d", linger, st.Ready, n+1)
		}
		return got
	}
	held, unheld := syncs(20*time.Millisecond), syncs(0)
	t.Logf("%d publishes %v apart: %d syncs with a 20ms linger, %d without", n, gap, held, unheld)
	if held*3 > unheld {
		t.Fatalf("%d syncs with the linger against %d without: publishes were not held together", held, unheld)
	}
}

// With a share set, publishes are held only as long as the commit tail
// allows: nothing before a window has set the hold, and up to the linger
// once the tail allows it.
func TestLingerShareFollowsCommitTail(t *testing.T) {
	const n, gap = 100, 2 * time.Millisecond
	node := sharedLog.node(t)
	r := openLingeringShare(t, node, sharedLinger, 0.25)
	unheld := publishSteadily(t, node, r, n, gap)
	r.pub.tail.wait.Store(int64(sharedLinger)) // as a slow window would
	held := publishSteadily(t, node, r, n, gap)
	t.Logf("%d publishes %v apart: %d syncs before the tail allowed a hold, %d after", n, gap, unheld, held)
	if unheld < n/2 {
		t.Fatalf("%d syncs for %d publishes before any window: held with no hold allowed", unheld, n)
	}
	if held*3 > unheld {
		t.Fatalf("%d syncs with the hold allowed against %d before: not held together", held, unheld)
	}
	if st := r.Stats(); st.Ready != 2*n {
		t.Fatalf("%d messages stored, want %d", st.Ready, 2*n)
	}
}

// While the commit tail holds nothing, PublishLingerBatch 2 still holds a
// publish until the next one arrives: publishes coming in pairs (the
// second a few milliseconds after the first, well within the linger)
// share an entry, which they do not without it, and the second sends the
// pair rather than the linger. Once the tail allows a hold, a steady
// stream is held in batches larger than pairs.
//
// A pair's first publish is held only if it comes within the linger of
// the publish before it: the last pair's second, whose confirm the loop
// waits for. pairLinger leaves that confirm most of 100 ms on a loaded
// machine (CI once saw 21.7 ms, over the 20 ms of sharedLinger).
func TestLingerPairsWhileCommitsAreQuick(t *testing.T) {
	const pairs, within, between = 40, 3 * time.Millisecond, 10 * time.Millisecond
	const pairLinger = 100 * time.Millisecond
	run := func(batch int) (syncs uint64, took time.Duration) {
		node := sharedLog.node(t)
		r := openLingeringBatch(t, node, pairLinger, 0.25, batch)
		<-startPublish(t, r, "warm-up")
		before := node.log.Commits()
		var answers []<-chan error
		for i := range pairs {
			answers = append(answers, startPublish(t, r, fmt.Sprint(i, "a")))
			time.Sleep(within) // the pair's second comes this long after its first
			start := time.Now()
			second := startPublish(t, r, fmt.Sprint(i, "b"))
			if err := await(t, "publish", second); err != nil {
				t.Fatal(err)
			}
			took = max(took, time.Since(start))
			time.Sleep(between) // and the next pair this long after it
		}
		for i, a := range answers {
			if err := await(t, fmt.Sprint("publish ", i), a); err != nil {
				t.Fatalf("publish %d: %v", i, err)
			}
		}
		syncs = node.log.Commits() - before
		if st := r.Stats(); st.Ready != 2*pairs+1 {
			t.Fatalf("batch %d: %d messages stored, want %d", batch, st.Ready, 2*pairs+1)
		}
		if batch > 0 {
			// On a fresh replica, whose commit tail ends no window (a
			// second) during these publishes to reset the hold set here.
			node := sharedLog.node(t)
			r := openLingeringBatch(t, node, sharedLinger, 0.25, batch)
			<-startPublish(t, r, "warm-up")
			r.pub.tail.wait.Store(int64(sharedLinger)) // as a slow window would
			steady := publishSteadily(t, node, r, pairs, 2*time.Millisecond)
			t.Logf("%d publishes 2ms apart with the tail's hold: %d syncs", pairs, steady)
			if steady*3 > pairs {
				t.Fatalf("%d syncs for %d steady publishes with the tail's hold: held in pairs only", steady, pairs)
			}
		}
		return syncs, took
	}
	paired, tookPaired := run(2)
	unpaired, _ := run(0)
	t.Logf("%d pairs %v apart within: %d syncs held in pairs, %d not held; a pair's second confirmed within %v",
		pairs, within, paired, unpaired, tookPaired)
	if paired > pairs+pairs/5 || unpaired*2 < paired*3 {
		t.Fatalf("%d syncs held in pairs against %d not held, for %d pairs: pairs did not share entries", paired, unpaired, pairs)
	}
	if tookPaired >= pairLinger {
		t.Fatalf("a pair's second publish took %v to confirm: the pair waited out the %v linger", tookPaired, pairLinger)
	}
}

// publishSteadily publishes n messages gap apart, each without waiting
// for the one before, waits for their confirms and returns how many
// times the node's log synced meanwhile.
func publishSteadily(t *testing.T, node *testNode, r *Replica, n int, gap time.Duration) uint64 {
	t.Helper()
	before := node.log.Commits()
	var answers []<-chan error
	tick := time.NewTicker(gap)
	for i := range n {
		answers = append(answers, startPublish(t, r, fmt.Sprint(i)))
		<-tick.C
	}
	tick.Stop()
	for i, a := range answers {
		if err := await(t, fmt.Sprint("publish ", i), a); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	return node.log.Commits() - before
}

// sharedLinger is the longest hold in TestLingerShareFollowsCommitTail.
const sharedLinger = 20 * time.Millisecond

// A publisher that waits for each confirm before the next publish never
// has company: after a few held publishes that stayed alone, the leader
// stops holding, so such a publisher runs nearly as fast as without the
// linger (held, 30 publishes would take 30 lingers).
func TestLingerLeavesSerialPublisherAlone(t *testing.T) {
	const wait = 100 * time.Millisecond
	for _, window := range []int{1, 4} {
		r := openLingering(t, sharedLog.node(t), wait)
		start := time.Now()
		for round := range 30 {
			var answers []<-chan error
			for i := range window {
				answers = append(answers, startPublish(t, r, fmt.Sprint(round, i)))
			}
			for _, a := range answers {
				if err := await(t, "publish", a); err != nil {
					t.Fatal(err)
				}
			}
		}
		took := time.Since(start)
		t.Logf("window %d: 30 rounds in %v", window, took)
		// linger.Misses held rounds, then none for linger.Rest.
		if limit := (linger.Misses + 5) * wait; took > limit {
			t.Fatalf("window %d: 30 rounds took %v, over %v: the publisher stayed held", window, took, limit)
		}
	}
}

// basic.get and purge come after what was published before them, held or
// not: a held publish goes to the log first.
func TestLingerGetAndPurgeSeeHeldPublishes(t *testing.T) {
	const linger = time.Hour // only a flush sends them
	r := openLingering(t, sharedLog.node(t), linger)
	if err := await(t, "m0", startPublish(t, r, "m0")); err != nil {
		t.Fatal(err)
	}
	m1 := startPublish(t, r, "m1") // within the linger of m0: held
	select {
	case err := <-m1:
		t.Fatalf("m1 answered (%v) while it should be held", err)
	case <-time.After(50 * time.Millisecond):
	}
	for _, want := range []string{"m0", "m1"} {
		d, _, ok, err := r.Get(true)
		if err != nil || !ok || string(d.Message.Body) != want {
			t.Fatalf("get: %q, ok %v, err %v; want %s", d.Message.Body, ok, err, want)
		}
	}
	if err := await(t, "m1", m1); err != nil {
		t.Fatal(err)
	}
	m2 := startPublish(t, r, "m2")
	m3 := startPublish(t, r, "m3")
	if n, err := r.Purge(); err != nil || n != 2 {
		t.Fatalf("purge: %d, %v; want the 2 held publishes", n, err)
	}
	for _, a := range []<-chan error{m2, m3} {
		if err := await(t, "purged publish", a); err != nil {
			t.Fatal(err)
		}
	}
}

// Held publishes that this member answered when it stopped leading (they
// were nacked, and their publishers may send them again) are never
// appended afterwards, should it lead again; later publishes are.
func TestLingerDropsHeldPublishesAnsweredOnLeadershipLoss(t *testing.T) {
	const linger = 100 * time.Millisecond
	r := openLingering(t, sharedLog.node(t), linger)
	if err := await(t, "m0", startPublish(t, r, "m0")); err != nil {
		t.Fatal(err)
	}
	m1 := startPublish(t, r, "m1") // held
	// As lease.go does when this member stops leading; a one-member
	// group never does, so it still leads afterwards, as one elected
	// again would.
	r.pub.failPending(ErrNotLeader)
	if err := await(t, "m1", m1); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("held m1 answered %v, want ErrNotLeader", err)
	}
	time.Sleep(3 * linger) // its linger has passed
	if st := r.Stats(); st.Ready != 1 {
		t.Fatalf("%d messages stored after the nacked m1's linger, want 1 (m0)", st.Ready)
	}
	var wg sync.WaitGroup
	for _, body := range []string{"m2", "m3"} {
		wg.Add(1)
		a := startPublish(t, r, body)
		go func() {
			defer wg.Done()
			if err := await(t, body, a); err != nil {
				t.Errorf("%s: %v", body, err)
			}
		}()
	}
	wg.Wait()
	for _, want := range []string{"m0", "m2", "m3"} {
		d, _, ok, err := r.Get(true)
		if err != nil || !ok || string(d.Message.Body) != want {
			t.Fatalf("get: %q, ok %v, err %v; want %s", d.Message.Body, ok, err, want)
		}
	}
}

// The commit tail is fed by the leader's own commits: after a window of
// them, a linger shorter than a share of any p99 (at least a bucket) is
// held whole, and one longer than a share of any p99 the histogram can
// hold (16 ms) is not held at all.
func TestLingerShareLearnsFromCommits(t *testing.T) {
	for _, c := range []struct {
		linger, want time.Duration
	}{
		{tailBucket / 4, tailBucket / 4},
		{time.Second, 0},
	} {
		r := openLingeringShare(t, sharedLog.node(t), c.linger, 0.25)
		deadline := time.Now().Add(tailWindow + 500*time.Millisecond)
		for i := 0; time.Now().Before(deadline) || i < tailSamples+1; i++ {
			if err := await(t, "publish", startPublish(t, r, fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond) // publishes spread over the window, for its samples
		}
		if r.pub.tail.samples == 0 && r.pub.tail.start.IsZero() {
			t.Fatalf("linger %v: the commit tail saw no commits", c.linger)
		}
		if w := time.Duration(r.pub.tail.wait.Load()); w != c.want {
			t.Fatalf("linger %v: hold %v after a window of commits, want %v", c.linger, w, c.want)
		}
	}
}

// Settlements the settler proposes at a steady rate go to the log with
// the publishes held for company, not with log writes of their own: a
// queue published to and consumed from steadily syncs about as often as
// when it was only published to, though its log takes the settlements too.
// The last batch, after the publishes stopped, waits out the linger and
// goes alone.
func TestSettlementsRideWithHeldPublishes(t *testing.T) {
	const n, gap = 100, 2 * time.Millisecond
	node := sharedLog.node(t)
	r := openLingering(t, node, sharedLinger)
	<-startPublish(t, r, "warm-up")
	alone := publishSteadily(t, node, r, n, gap)
	c := &ackingConsumer{r: r}
	if err := r.Consume(c, queue.ConsumeOptions{Prefetch: 1000}); err != nil {
		t.Fatal(err)
	}
	settled := func() bool { st := r.Stats(); return st.Ready == 0 && st.Unacked == 0 }
	testwait.For(t, 5*time.Second, "the first publishes consumed", settled)
	before := r.Status().LastLogIndex
	consumed := publishSteadily(t, node, r, n, gap)
	testwait.For(t, 5*time.Second, "every publish consumed", settled)
	settles := int(r.Status().LastLogIndex-before) - n
	t.Logf("%d publishes %v apart: %d syncs unconsumed; consumed, %d syncs with %d settlement entries",
		n, gap, alone, consumed, settles)
	if settles < 5 {
		t.Fatalf("%d settlement entries for %d acks over %v: too few to tell", settles, n, n*gap)
	}
	if consumed > alone+uint64(settles)/2 {
		t.Fatalf("%d syncs consumed against %d unconsumed, with %d settlement entries: they took syncs of their own",
			consumed, alone, settles)
	}
}

// ackingConsumer acknowledges each delivery as it arrives.
type ackingConsumer struct {
	fakeConsumer
	r *Replica
}

func (a *ackingConsumer) Deliver(d queue.Delivery) bool {
	go a.r.Settle([]uint64{d.ID})
	return a.fakeConsumer.Deliver(d)
}
