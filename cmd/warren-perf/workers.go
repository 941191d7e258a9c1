package main

import (
	"context"
	"errors"
	"log"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cmd/warren-perf/internal/ratelimit"
)

// workers are the connected, subscribed producers and consumers of one run, ready to start.
type workers struct {
	producers []*producer
	consumers []*consumer
	pstats    []*producerStats
	cstats    []*consumerStats
	pconns    []*amqp.Connection
	cconns    []*amqp.Connection
}

// setupWorkers declares the queues, opens every connection and channel and subscribes the
// consumers. Everything that can fail on a misconfigured or unreachable broker fails here,
// before any measurement starts. runStart is the stale-message cutoff.
func setupWorkers(ctx context.Context, cfg *Config, runStart int64, logger *log.Logger) (*workers, error) {
	if err := setupQueues(cfg); err != nil {
		return nil, err
	}
	queues := cfg.QueueNames()
	w := &workers{}
	var err error
	// Consumers connect and subscribe first, so the first messages find them ready.
	consumerURIs := cfg.URIs
	if len(cfg.ConsumerURIs) > 0 {
		consumerURIs = cfg.ConsumerURIs
	}
	if w.cconns, err = dialAll(consumerURIs, cfg.Consumers, "consumer", cfg.BatchWrites); err != nil {
		return nil, err
	}
	if w.pconns, err = dialAll(cfg.URIs, cfg.Producers, "producer", cfg.BatchWrites); err != nil {
		closeAll(w.cconns)
		return nil, err
	}
	fail := func(err error) (*workers, error) {
		w.closeAll()
		return nil, err
	}

	// Stale filtering needs our own producers: in a consumer-only run every message was, by
	// definition, sent by someone else, before or during the run.
	staleBefore := runStart
	if cfg.Producers == 0 {
		staleBefore = 0
	}
	w.cstats = make([]*consumerStats, cfg.Consumers)
	w.consumers = make([]*consumer, cfg.Consumers)
	for i := range w.consumers {
		w.cstats[i] = newConsumerStats()
		if w.consumers[i], err = newConsumer(i+1, cfg, w.cconns[i], queues[i%len(queues)], w.cstats[i], staleBefore); err != nil {
			return fail(err)
		}
	}
	limiter := ratelimit.New(cfg.Rate) // one limiter shared by all: --rate is a total
	w.pstats = make([]*producerStats, cfg.Producers)
	w.producers = make([]*producer, cfg.Producers)
	for i := range w.producers {
		w.pstats[i] = newProducerStats()
		if w.producers[i], err = newProducer(i+1, cfg, w.pconns[i], queues[i%len(queues)], limiter, w.pstats[i], logger); err != nil {
			return fail(err)
		}
	}
	if ctx.Err() != nil {
		return fail(errors.New("interrupted before the run started"))
	}
	return w, nil
}

func (w *workers) closeAll() {
	closeAll(append(append([]*amqp.Connection{}, w.cconns...), w.pconns...))
}
