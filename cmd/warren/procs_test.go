package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

func TestProcScaler(t *testing.T) {
	quiet := procsDownAt / 2
	between := (procsDownAt + procsUpAt) / 2
	busy := procsUpAt
	for _, tc := range []struct {
		name  string
		cores []float64
		want  []int
	}{
		{"starts with all, down after enough quiet intervals",
			[]float64{quiet, quiet, quiet, quiet, quiet}, []int{4, 4, 4, 1, 1}},
		{"an interval between the marks starts the quiet count again",
			[]float64{quiet, quiet, quiet, between, quiet, quiet, quiet, quiet}, []int{4, 4, 4, 4, 4, 4, 4, 1}},
		{"one busy interval brings all back",
			[]float64{quiet, quiet, quiet, quiet, between, busy, quiet}, []int{4, 4, 4, 1, 1, 4, 4}},
		{"between the marks keeps one",
			[]float64{quiet, quiet, quiet, quiet, between, between, between}, []int{4, 4, 4, 1, 1, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newProcScaler(4)
			for i, c := range tc.cores {
				if got := s.observe(c); got != tc.want[i] {
					t.Fatalf("interval %d (%.2f cores): %d processors, want %d", i, c, got, tc.want[i])
				}
			}
		})
	}
}

// TestAdaptiveProcs runs the server as a process and reads its GOMAXPROCS
// from its Prometheus metrics: one processor while idle, all of them
// while clients publish as fast as they can, one again afterwards.
func TestAdaptiveProcs(t *testing.T) {
	max := runtime.GOMAXPROCS(0)
	if max < 2 || os.Getenv("GOMAXPROCS") != "" {
		t.Skipf("needs at least 2 processors and no GOMAXPROCS (%d, %q)", max, os.Getenv("GOMAXPROCS"))
	}
	metricsAddr := freeAddr(t)
	p := startServer(t, t.TempDir(), freeAddr(t), "WARREN_PROMETHEUS_ADDR="+metricsAddr)
	procs := func() int {
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "go_sched_gomaxprocs_threads "); ok {
				n, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatal(err)
				}
				return int(n)
			}
		}
		t.Fatal("no go_sched_gomaxprocs_threads in /metrics")
		return 0
	}
	// Not nodetest.Eventually: it polls every 20 ms, and a scrape costs
	// the server about 1.3 ms of CPU, load on the server whose load this
	// test watches. Every 100 ms, with the value seen in the failure.
	await := func(want int, within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			got := procs()
			if got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("GOMAXPROCS %d after %v, want %d", got, within, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	await(1, 15*time.Second)

	// Publishers with confirms, as fast as the server takes them.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var published [4]int
	for i := range published {
		ch, err := p.dial().Channel()
		if err != nil {
			t.Fatal(err)
		}
		q := fmt.Sprintf("procs-%d", i)
		if _, err := ch.QueueDeclare(q, true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
			t.Fatal(err)
		}
		if err := ch.Confirm(false); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := make([]byte, 1000)
			for ctx.Err() == nil {
				var batch []*amqp091.DeferredConfirmation
				for range 64 {
					dc, err := ch.PublishWithDeferredConfirm("", q, false, false, amqp091.Publishing{Body: body})
					if err != nil {
						return
					}
					batch = append(batch, dc)
				}
				for _, dc := range batch {
					dc.Wait()
				}
				published[i] += len(batch)
			}
		}()
	}
	defer func() { stop(); wg.Wait() }()
	await(max, 15*time.Second)
	stop()
	wg.Wait()
	t.Logf("published %v", published)
	await(1, 15*time.Second)
}
