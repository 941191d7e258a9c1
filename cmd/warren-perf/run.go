package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cmd/warren-perf/internal/hist"
)

// stopGrace bounds how long shutdown waits for a goroutine that ignores cancellation (a
// publish blocked on a socket the broker stopped reading) before forcing its connection shut.
const stopGrace = 2 * time.Second

// run executes one load test. ctx ending (Ctrl-C) stops the run early; the summary is still
// produced. It returns an error without a summary when setup fails (connect, declare), and a
// summary together with an error when the broker fails the run midway.
func run(ctx context.Context, cfg *Config, stdout, stderr io.Writer) (*Summary, error) {
	logger := log.New(stderr, "warren-perf: ", 0)
	w, err := setupWorkers(ctx, cfg, nowNanos(), logger)
	if err != nil {
		return nil, err
	}
	producers, consumers, pstats, cstats := w.producers, w.consumers, w.pstats, w.cstats
	queues := cfg.QueueNames()

	if !cfg.JSONOnly {
		fmt.Fprintf(stdout, "warren-perf: %d producer(s), %d consumer(s) on %d %s queue(s) %s, %d-byte messages, confirm window %d, prefetch %d, duration %s\n",
			cfg.Producers, cfg.Consumers, len(queues), cfg.QueueType, describeQueues(queues), cfg.Size, cfg.Confirm, cfg.Prefetch, describeDuration(cfg))
	}

	// runCtx ends on Ctrl-C or on the first fatal error (its cause).
	runCtx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	ph := phaseTimes{start: time.Now()}

	stopProgress := make(chan struct{})
	var progressDone sync.WaitGroup
	if !cfg.JSONOnly {
		pr := newProgress(stdout, pstats, cstats, ph.start)
		progressDone.Go(func() { pr.loop(stopProgress) })
	}

	consCtx, stopConsumers := context.WithCancel(runCtx)
	defer stopConsumers()
	var cwg sync.WaitGroup
	for _, c := range consumers {
		cwg.Go(func() {
			if err := c.run(consCtx); err != nil {
				fail(err)
			}
		})
	}

	prodCtx, stopPublishing := runCtx, context.CancelFunc(func() {})
	if cfg.Duration > 0 {
		prodCtx, stopPublishing = context.WithTimeout(runCtx, cfg.Duration)
	}
	defer stopPublishing()
	var pwg, publishing sync.WaitGroup
	publishing.Add(len(producers))
	for _, p := range producers {
		pwg.Go(func() {
			if err := p.run(prodCtx, runCtx, cfg.Drain, publishing.Done); err != nil {
				fail(err)
			}
		})
	}

	// Phase 1: publishing. A consumer-only run lasts --duration (or until Ctrl-C).
	if len(producers) == 0 {
		<-prodCtx.Done()
		ph.publishEnd = time.Now()
	} else {
		ph.publishEnd = awaitPublishing(&publishing, prodCtx, logger)
	}
	stopPublishing()

	// Phase 2: drain. Producers wait for their confirms themselves; consumers get until
	// publishEnd+drain to receive everything that was routed (sent minus nacked/returned).
	if len(producers) > 0 && len(consumers) > 0 {
		awaitReceived(runCtx, pstats, cstats, ph.publishEnd.Add(cfg.Drain))
	}
	// Producers may still be draining confirms (≤ drain) and closing (≤ closeTimeout).
	waitOrForce(&pwg, cfg.Drain+closeTimeout+stopGrace, w.pconns, logger, "producers")
	stopConsumers()
	waitOrForce(&cwg, closeTimeout+stopGrace, w.cconns, logger, "consumers")

	close(stopProgress)
	progressDone.Wait()

	// runCtx's cause is the first fatal error, or else whatever ended ctx (Ctrl-C), which is
	// a normal way to end a run.
	fatal := context.Cause(runCtx)
	if ctx.Err() != nil && fatal == context.Cause(ctx) {
		fatal = nil
	}
	return finish(cfg, w, ph, ctx.Err() != nil, fatal, stdout, logger)
}

// finish builds and prints the summary (and deletes the queues with --delete); fatal is the
// error that ended the run early, if any.
func finish(cfg *Config, w *workers, ph phaseTimes, interrupted bool, fatal error,
	stdout io.Writer, logger *log.Logger) (*Summary, error) {
	t := sumTotals(w.pstats, w.cstats)
	var confirm, e2e hist.Snapshot
	confirmSnapshot(w.pstats, &confirm)
	e2eSnapshot(w.cstats, &e2e)
	s := buildSummary(cfg, t, &confirm, &e2e, ph)
	s.Interrupted = interrupted
	runErr := fatal
	if fatal != nil {
		s.Error = fatal.Error()
	}
	if cfg.Delete {
		if err := deleteQueues(cfg); err != nil {
			logger.Printf("--delete: %v", err)
			runErr = errors.Join(runErr, err)
		}
	}
	if !cfg.JSONOnly {
		printHuman(stdout, s, &confirm, &e2e)
	}
	if err := printJSON(stdout, s); err != nil {
		runErr = errors.Join(runErr, err)
	}
	return s, runErr
}

// awaitPublishing returns when every producer's publish loop has ended, or shortly after
// prodCtx ends (deadline, Ctrl-C, error) even if a producer is still stuck inside a publish,
// e.g. on a connection the broker blocked: its publishes are then simply not counted.
func awaitPublishing(publishing *sync.WaitGroup, prodCtx context.Context, logger *log.Logger) time.Time {
	done := make(chan struct{})
	go func() { publishing.Wait(); close(done) }()
	select {
	case <-done:
		return time.Now()
	case <-prodCtx.Done():
	}
	end := time.Now()
	select {
	case <-done:
	case <-time.After(stopGrace):
		logger.Printf("some producers are still blocked in a publish (broker flow control or alarm?)")
	}
	return end
}

// awaitReceived polls until consumers have received every routed message, the deadline
// passes or ctx ends.
func awaitReceived(ctx context.Context, ps []*producerStats, cs []*consumerStats, deadline time.Time) {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for time.Now().Before(deadline) {
		tot := sumTotals(ps, cs)
		if tot.received >= tot.sent-tot.nacked-tot.returned {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// waitOrForce waits for wg; if it takes longer than grace (a goroutine blocked inside the
// client library), it closes the connections to unblock it and gives up after another grace,
// so a wedged broker can never keep the summary from being printed.
func waitOrForce(wg *sync.WaitGroup, grace time.Duration, conns []*amqp.Connection, logger *log.Logger, what string) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-time.After(grace):
	}
	logger.Printf("%s did not stop within %s; closing their connections", what, grace)
	go closeAll(conns)
	select {
	case <-done:
	case <-time.After(closeTimeout + stopGrace):
		logger.Printf("%s still blocked; reporting without them", what)
	}
}

func closeAll(conns []*amqp.Connection) {
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() { closeConn(c) })
	}
	wg.Wait()
}

func describeQueues(names []string) string {
	if len(names) <= 4 {
		return strings.Join(names, ", ")
	}
	return names[0] + " .. " + names[len(names)-1]
}

func describeDuration(cfg *Config) string {
	switch {
	case cfg.Duration > 0 && cfg.Messages > 0:
		return fmt.Sprintf("%s or %d msgs/producer", cfg.Duration, cfg.Messages)
	case cfg.Duration > 0:
		return cfg.Duration.String()
	case cfg.Messages > 0:
		return fmt.Sprintf("%d msgs/producer", cfg.Messages)
	default:
		return "until interrupted"
	}
}
