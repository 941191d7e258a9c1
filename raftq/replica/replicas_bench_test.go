package replica

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/wal"
)

// BenchmarkReplicasPublish: one-member queue replicas on one node, each
// with a publisher keeping 8 publishes of 1 KiB in flight (publisher
// confirms: the next goes once one is committed). An op is one confirmed
// message.
//
//	go test ./raftq/replica -run '^$' -bench ReplicasPublish -benchtime 3s -count 3
func BenchmarkReplicasPublish(b *testing.B) {
	for _, n := range []int{1, 10} {
		for _, st := range []storage{perQueueFiles, sharedLog} {
			b.Run(fmt.Sprintf("replicas=%d/%v", n, st), func(b *testing.B) {
				benchReplicasPublish(b, n, st)
			})
		}
	}
}

func benchReplicasPublish(b *testing.B, n int, st storage) {
	const window = 8
	dir := b.TempDir()
	var shared *wal.Log
	if st == sharedLog {
		var err error
		if shared, err = wal.Open(filepath.Join(dir, "wal"), wal.Options{}); err != nil {
			b.Fatal(err)
		}
		defer shared.Close()
	}
	replicas := make([]*Replica, n)
	for i := range replicas {
		r, err := Open(Config{
			Name: fmt.Sprintf("bench/q%d", i), Dir: filepath.Join(dir, fmt.Sprintf("q%d", i)),
			NodeID: "n1", Created: 1, WAL: shared,
			Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		replicas[i] = r
	}
	body := make([]byte, 1024)
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	var commits0 uint64
	if shared != nil {
		commits0 = shared.Commits()
	}
	for _, r := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots := make(chan struct{}, window)
			var pending sync.WaitGroup
			for left.Add(-1) >= 0 {
				slots <- struct{}{}
				pending.Add(1)
				err := r.Enqueue(context.Background(), &queue.Message{RoutingKey: "q", Body: body}, func(err error) {
					if err != nil {
						b.Error(err)
					}
					<-slots
					pending.Done()
				})
				if err != nil {
					b.Error(err)
					pending.Done()
					return
				}
			}
			pending.Wait()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed, "msgs/s")
	if shared != nil {
		b.ReportMetric(float64(shared.Commits()-commits0)/elapsed, "fsyncs/s")
	}
}
