package wal

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// BenchmarkGroupCommit: N groups, each with a goroutine storing one 1 KiB
// entry per StoreLogs in a loop, on the test's temporary directory (the
// real disk, fsyncs on). An op is one entry; fsyncs/op is commits per
// entry.
//
//	go test ./raftq/wal -run '^$' -bench GroupCommit -benchtime 3s -count 3
func BenchmarkGroupCommit(b *testing.B) {
	for _, groups := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			l, err := Open(b.TempDir(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			data := make([]byte, 1024)
			var left atomic.Int64
			left.Store(int64(b.N))
			var wg sync.WaitGroup
			b.ResetTimer()
			start, commits0 := time.Now(), l.Commits()
			for k := 0; k < groups; k++ {
				g, err := l.Group(fmt.Sprint("g", k))
				if err != nil {
					b.Fatal(err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := uint64(1); left.Add(-1) >= 0; i++ {
						if err := g.StoreLogs([]*raft.Log{{Index: i, Term: 1, Type: raft.LogCommand, Data: data}}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start).Seconds()
			b.StopTimer()
			fsyncs := float64(l.Commits() - commits0)
			b.ReportMetric(float64(b.N)/elapsed, "entries/s")
			b.ReportMetric(fsyncs/float64(b.N), "fsyncs/op")
		})
	}
}

// BenchmarkGetLog reads back entries of 1 KiB, as a consumer's deliveries
// do.
func BenchmarkGetLog(b *testing.B) {
	l, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	g, _ := l.Group("q")
	const n = 1000
	logs := make([]*raft.Log, n)
	for i := range logs {
		logs[i] = &raft.Log{Index: uint64(i + 1), Term: 1, Data: make([]byte, 1024)}
	}
	if err := g.StoreLogs(logs); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	var e raft.Log
	for i := 0; i < b.N; i++ {
		if err := g.GetLog(uint64(i%n+1), &e); err != nil {
			b.Fatal(err)
		}
	}
}
