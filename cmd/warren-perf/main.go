// Command warren-perf is a load generator for Warren and other AMQP 0-9-1 brokers, in the
// spirit of RabbitMQ's PerfTest: N producers and M consumers on one or more queues, optional
// publisher confirms, rate limiting, per-second progress, and end-to-end and confirm latency
// percentiles, ending with a one-line JSON summary for scripts. Run with --help for flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	cfg, err := parseConfig(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		os.Exit(2)
	}

	// First Ctrl-C/SIGTERM: stop and report; second: exit at once (e.g. broker hung).
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigs
		fmt.Fprintf(os.Stderr, "warren-perf: %v: stopping (again to exit immediately)\n", s)
		cancel()
		<-sigs
		os.Exit(130)
	}()

	if _, err := run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "warren-perf:", err)
		os.Exit(1)
	}
}
