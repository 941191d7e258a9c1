// Command warren runs one Warren node: a RabbitMQ-compatible AMQP 0-9-1
// broker. See --help for its settings.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/warrenmq/warren/cluster/node"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	cfg, err := loadConfig(args, os.Getenv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "warren:", err)
		return 2
	}
	log := cfg.logger(os.Stderr)
	if os.Getenv("GOGC") == "" {
		// A broker's heap is mostly long-lived queue state; the default
		// (GOGC=100) lets garbage grow to the size of all of it before
		// collecting. Half that keeps resident memory near the live set
		// (a 1M-message quorum queue backlog measured 83 MB instead of 110)
		// for little CPU. GOGC in the environment overrides it.
		debug.SetGCPercent(50)
	}
	if cfg.debugAddr != "" {
		go func() {
			// net/http/pprof registers its handlers on the default mux.
			if err := http.ListenAndServe(cfg.debugAddr, nil); err != nil {
				log.Error("debug listener stopped", "addr", cfg.debugAddr, "err", err)
			}
		}()
	}
	n, err := node.Start(cfg.nodeConfig(log))
	if err != nil {
		log.Error("cannot start node", "err", err)
		return 1
	}
	log.Info("warren started", "amqp", n.AMQPAddr().String(), "data_dir", cfg.dataDir)

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	select {
	case s := <-sigs:
		log.Info("shutting down", "signal", s.String())
	case <-n.Done():
		log.Error("AMQP listener stopped")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		log.Error("shutdown", "err", err)
		return 1
	}
	log.Info("warren stopped")
	return 0
}
