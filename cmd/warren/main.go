// Command warren runs one Warren node: a RabbitMQ-compatible AMQP 0-9-1
// broker. See --help for its settings.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/metrics"
	"syscall"
	"time"

	"github.com/warrenmq/warren/cluster/exporter"
	"github.com/warrenmq/warren/cluster/node"
	"github.com/warrenmq/warren/cluster/pki"
	"github.com/warrenmq/warren/cmd/warren/timerslack"
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
	if cfg.timerSlack > 0 {
		// First, so that the threads started later take it from their
		// creators.
		if threads, refused, err := timerslack.Set(cfg.timerSlack); err != nil {
			log.Info("timer slack not set on every thread", "slack", cfg.timerSlack, "threads", threads, "refused", refused, "err", err)
		} else {
			log.Debug("timer slack set", "slack", cfg.timerSlack, "threads", threads)
		}
	}
	if cfg.adaptiveProcs && os.Getenv("GOMAXPROCS") == "" {
		go adaptProcs(log)
	}
	if os.Getenv("GOGC") == "" {
		go tuneGC()
	}
	if cfg.debugAddr != "" {
		go func() {
			// net/http/pprof registers its handlers on the default mux.
			if err := http.ListenAndServe(cfg.debugAddr, nil); err != nil {
				log.Error("debug listener stopped", "addr", cfg.debugAddr, "err", err)
			}
		}()
	}
	tlsStore, err := cfg.security.loadTLS(log)
	if err != nil {
		log.Error("cannot load TLS material", "err", err)
		return 1
	}
	nodeCfg := cfg.nodeConfig(log)
	cfg.security.apply(&nodeCfg, tlsStore, log)
	storageFailed := make(chan error, 1)
	nodeCfg.OnStorageFailure = func(err error) {
		select {
		case storageFailed <- err:
		default:
		}
	}
	if tlsStore != nil {
		watchCtx, stopWatching := context.WithCancel(context.Background())
		defer stopWatching()
		go tlsStore.Watch(watchCtx, tlsWatchInterval)
	}
	n, err := node.Start(nodeCfg)
	if err != nil {
		log.Error("cannot start node", "err", err)
		return 1
	}
	if cfg.prometheusAddr != "" {
		stop, err := serveMetrics(n, cfg.prometheusAddr, log)
		if err != nil {
			log.Error("cannot serve metrics", "addr", cfg.prometheusAddr, "err", err)
			n.Close(context.Background())
			return 1
		}
		defer stop()
	}
	if cfg.managementAddr != "" {
		stop, err := serveManagement(n, cfg.managementAddr, tlsStore, cfg.security.loginFailureDelay, log)
		if err != nil {
			log.Error("cannot serve the management API", "addr", cfg.managementAddr, "err", err)
			n.Close(context.Background())
			return 1
		}
		defer stop()
	}
	if n.Name() != "" {
		log.Info("warren started as a cluster member", "node", n.Name(), "amqp", n.AMQPAddr().String(), "internal", n.InternalAddr().String(), "data_dir", cfg.dataDir)
		go func() {
			// Say when clients can log in: a new cluster forms once
			// --bootstrap-expect nodes see each other.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			if err := n.Ready(ctx); err == nil {
				log.Info("cluster ready", "node", n.Name())
			}
		}()
	} else {
		log.Info("warren started", "amqp", n.AMQPAddr().String(), "data_dir", cfg.dataDir)
	}

	sigs := make(chan os.Signal, 1)
	// A hang-up re-reads the TLS material (as the files' watcher does
	// within seconds) and keeps the node running: a daemon's convention,
	// and it keeps a node whose terminal closed, or whose stopped process
	// group was orphaned, from ending without a line in its log.
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
wait:
	for {
		select {
		case s := <-sigs:
			if s == syscall.SIGHUP {
				reloadTLS(tlsStore, log)
				continue
			}
			log.Info("shutting down", "signal", s.String())
			break wait
		case <-n.Done():
			log.Error("AMQP listener stopped")
			break wait
		case err := <-storageFailed:
			return stopOnStorageFailure(n, err, log)
		}
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

// storageStopWait bounds how long a node whose storage failed tries to
// close its clients' connections before it exits.
const storageStopWait = 5 * time.Second

// stopOnStorageFailure stops a node whose queues' log can no longer
// write: what it committed is on disk, and it starts again cleanly once
// the disk has room or is repaired. It is cut off from the other nodes at
// once, as by a crash (node.Kill): a graceful stop handed its queues'
// leaderships off and kept its consume streams open for seconds while its
// raft could write nothing, and acknowledgements that reached it then
// were lost, their messages delivered again (the other nodes resend what
// they sent on a stream only when it breaks, and only its last moments).
// Its clients are told (320 CONNECTION_FORCED) within storageStopWait; the
// rest of the shutdown, which would wait on writes that cannot happen, is
// left to the exit.
func stopOnStorageFailure(n *node.Node, err error, log *slog.Logger) int {
	log.Error("storage failed: stopping the node; it keeps what it had committed and starts again once the disk has room",
		"err", err)
	closed := make(chan struct{})
	go func() {
		n.Kill()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(storageStopWait):
	}
	return 1
}

// reloadTLS re-reads the TLS material on SIGHUP.
func reloadTLS(store *pki.Store, log *slog.Logger) {
	if store == nil {
		log.Info("SIGHUP: no TLS material to reload")
		return
	}
	if err := store.Reload(); err != nil {
		log.Error("SIGHUP: TLS material not reloaded; keeping the old", "err", err)
	}
}

// tuneGC sets the collector's target from the live heap, unless GOGC is
// set. A broker's heap is mostly long-lived queue state: with a large one
// (a deep backlog) the default GOGC=100 lets garbage grow to the size of
// all of it, so above 32 MiB live it collects at 50 (a 1M-message quorum
// queue backlog measured 83 MB of RssAnon instead of 110). With a small
// heap the default's lower CPU cost wins: one quorum queue under load
// moved about 17% more messages at 100 than at 50.
func tuneGC() {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	current := 100
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for range t.C {
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return
		}
		want := 100
		if sample[0].Value.Uint64() > 32<<20 {
			want = 50
		}
		if want != current {
			debug.SetGCPercent(want)
			current = want
		}
	}
}

// serveMetrics serves n's Prometheus metrics on addr until stop.
func serveMetrics(n *node.Node, addr string, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for metrics: %w", err)
	}
	srv := &http.Server{Handler: exporter.Handler(n, version), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics listener stopped", "addr", addr, "err", err)
		}
	}()
	log.Info("serving Prometheus metrics", "addr", ln.Addr().String(), "paths", "/metrics /metrics/per-object")
	return func() { srv.Close() }, nil
}

// version is reported to clients and to the other nodes; set at build
// time with -ldflags "-X main.version=…".
var version = "0.1.0"
