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

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/cluster/queue"
)

// BenchmarkGroupCommit: N groups, each with a goroutine storing one 1 KiB
// entry per StoreLogs in a loop, on the test's temporary directory (the
// real disk, fsyncs on): a SharedLog against a boltLog file per group.
// An op is one entry; fsyncs/op is transactions per entry.
//
//	go test ./raftq/replica -run '^$' -bench GroupCommit -benchtime 3s -count 3
func BenchmarkGroupCommit(b *testing.B) {
	for _, groups := range []int{1, 10, 100} {
		for _, st := range []storage{perQueueFiles, sharedLog} {
			b.Run(fmt.Sprintf("groups=%d/%v", groups, st), func(b *testing.B) {
				benchGroupCommit(b, groups, st)
			})
		}
	}
}

func benchGroupCommit(b *testing.B, groups int, st storage) {
	dir := b.TempDir()
	stores := make([]raft.LogStore, groups)
	var shared *SharedLog
	if st == sharedLog {
		var err error
		if shared, err = OpenSharedLog(filepath.Join(dir, "log.db")); err != nil {
			b.Fatal(err)
		}
		defer shared.Close()
	}
	for i := range stores {
		var err error
		if shared != nil {
			stores[i], err = shared.Group(fmt.Sprintf("g%d", i))
		} else {
			var s *boltLog
			s, err = openBoltLog(filepath.Join(dir, fmt.Sprintf("g%d.db", i)))
			if err == nil {
				defer s.Close()
			}
			stores[i] = s
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	data := make([]byte, 1024)
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	var commits0 uint64
	if shared != nil {
		commits0 = shared.commits.Load()
	}
	for _, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := uint64(1); left.Add(-1) >= 0; i++ {
				if err := s.StoreLogs([]*raft.Log{{Index: i, Term: 1, Type: raft.LogCommand, Data: data}}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	b.StopTimer()
	fsyncs := float64(b.N) // one transaction per StoreLogs
	if shared != nil {
		fsyncs = float64(shared.commits.Load() - commits0)
	}
	b.ReportMetric(float64(b.N)/elapsed, "entries/s")
	b.ReportMetric(fsyncs/elapsed, "fsyncs/s")
	b.ReportMetric(fsyncs/float64(b.N), "fsyncs/op")
}

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
	var shared *SharedLog
	if st == sharedLog {
		var err error
		if shared, err = OpenSharedLog(filepath.Join(dir, "log.db")); err != nil {
			b.Fatal(err)
		}
		defer shared.Close()
	}
	replicas := make([]*Replica, n)
	for i := range replicas {
		r, err := Open(Config{
			Name: fmt.Sprintf("bench/q%d", i), Dir: filepath.Join(dir, fmt.Sprintf("q%d", i)),
			NodeID: "n1", Created: 1, SharedLog: shared,
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
		commits0 = shared.commits.Load()
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
		b.ReportMetric(float64(shared.commits.Load()-commits0)/elapsed, "fsyncs/s")
	}
}
