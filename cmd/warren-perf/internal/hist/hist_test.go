package hist

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// exactQuantile uses the same definition as Snapshot.Quantile: the smallest value with at
// least q of the data at or below it.
func exactQuantile(sorted []int64, q float64) int64 {
	if q <= 0 {
		return sorted[0]
	}
	rank := int(math.Ceil(q * float64(len(sorted))))
	rank = max(rank, 1)
	return sorted[rank-1]
}

func relErr(got, want int64) float64 {
	if want == 0 {
		return math.Abs(float64(got))
	}
	return math.Abs(float64(got-want)) / float64(want)
}

var quantiles = []float64{0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 0.9999, 1}

func TestQuantileAccuracyRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	dists := map[string]func() int64{
		// Log-uniform from 1µs to 10s: every octave of the histogram gets exercised.
		"loguniform": func() int64 { return int64(math.Exp(r.Float64()*math.Log(1e7)) * 1e3) },
		// Latency-like: a lognormal body around 500µs with a long tail.
		"lognormal": func() int64 { return int64(math.Exp(r.NormFloat64()*1.2) * 500e3) },
		// Small integers, where buckets are exact.
		"small": func() int64 { return r.Int64N(300) },
		// Bimodal, to test quantiles that fall between clusters.
		"bimodal": func() int64 {
			if r.IntN(10) == 0 {
				return 50e6 + r.Int64N(1e6)
			}
			return 200e3 + r.Int64N(10e3)
		},
	}
	for name, gen := range dists {
		t.Run(name, func(t *testing.T) {
			for _, n := range []int{1, 7, 1000, 200_000} {
				h := New()
				vals := make([]int64, n)
				for i := range vals {
					vals[i] = gen()
					h.Record(vals[i])
				}
				slices.Sort(vals)
				var s Snapshot
				h.AddTo(&s)
				if s.Total != uint64(n) {
					t.Fatalf("n=%d: total %d", n, s.Total)
				}
				for _, q := range quantiles {
					got, want := s.Quantile(q), exactQuantile(vals, q)
					if e := relErr(got, want); e > 0.01 {
						t.Errorf("n=%d q=%v: got %d want %d (error %.3f%%)", n, q, got, want, e*100)
					}
				}
				if s.Min != vals[0] || s.Max != vals[n-1] {
					t.Errorf("n=%d: min/max %d/%d, want %d/%d", n, s.Min, s.Max, vals[0], vals[n-1])
				}
			}
		})
	}
}

// Every bucket boundary must round-trip and every value must be within its bucket.
func TestBucketLayout(t *testing.T) {
	prevEnd := int64(0)
	for i := 0; i < NumBuckets; i++ {
		lo, w := bucketRange(i)
		if lo != prevEnd {
			t.Fatalf("bucket %d starts at %d, previous ended at %d", i, lo, prevEnd)
		}
		if bucketOf(lo) != i || bucketOf(lo+w-1) != i {
			t.Fatalf("bucket %d [%d,%d] does not round-trip", i, lo, lo+w-1)
		}
		if lo >= 2*subCount && float64(w)/float64(lo) > 1.0/subCount {
			t.Fatalf("bucket %d too wide: %d at %d", i, w, lo)
		}
		prevEnd = lo + w
	}
	if prevEnd != MaxValue+1 {
		t.Fatalf("buckets end at %d, want %d", prevEnd, int64(MaxValue+1))
	}
	if bucketOf(math.MaxInt64) != NumBuckets-1 {
		t.Fatal("values above MaxValue must clamp into the last bucket")
	}
}

func TestNegativeAndHuge(t *testing.T) {
	h := New()
	h.Record(-5)
	h.Record(math.MaxInt64)
	var s Snapshot
	h.AddTo(&s)
	if s.Min != 0 || s.Max != math.MaxInt64 || s.Quantile(1) != math.MaxInt64 || s.Quantile(0) != 0 {
		t.Fatalf("got min %d max %d", s.Min, s.Max)
	}
}

func TestMergeAndDelta(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	a, b := New(), New()
	var all []int64
	for range 10_000 {
		v := r.Int64N(1e9)
		a.Record(v)
		all = append(all, v)
		w := r.Int64N(1e6)
		b.Record(w)
		all = append(all, w)
	}
	var sa, sb, merged Snapshot
	a.AddTo(&sa)
	b.AddTo(&sb)
	merged.Merge(&sa)
	merged.Merge(&sb)
	var direct Snapshot
	a.AddTo(&direct)
	b.AddTo(&direct)
	if merged != direct {
		t.Fatal("Merge of snapshots differs from AddTo of both histograms")
	}
	slices.Sort(all)
	for _, q := range quantiles {
		if e := relErr(merged.Quantile(q), exactQuantile(all, q)); e > 0.01 {
			t.Errorf("merged q=%v error %.3f%%", q, e*100)
		}
	}

	// Delta between two cumulative snapshots must describe only the later values.
	prev := sa
	var later []int64
	for range 5000 {
		v := 5e6 + r.Int64N(1e6)
		a.Record(v)
		later = append(later, v)
	}
	var cur, d Snapshot
	a.AddTo(&cur)
	d.Delta(&cur, &prev)
	if d.Total != uint64(len(later)) {
		t.Fatalf("delta total %d want %d", d.Total, len(later))
	}
	slices.Sort(later)
	for _, q := range []float64{0.5, 0.99} {
		if e := relErr(d.Quantile(q), exactQuantile(later, q)); e > 0.01 {
			t.Errorf("delta q=%v: got %d want %d", q, d.Quantile(q), exactQuantile(later, q))
		}
	}
	var empty Snapshot
	empty.Delta(&cur, &cur)
	if empty.Total != 0 || empty.Quantile(0.5) != 0 {
		t.Fatal("delta of equal snapshots must be empty")
	}
}

// A reader snapshotting while the single writer records must be race-free (run with -race).
func TestConcurrentSnapshot(t *testing.T) {
	h := New()
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 200_000 {
			h.Record(int64(i))
		}
	})
	var last uint64
	for range 50 {
		var s Snapshot
		h.AddTo(&s)
		if s.Total < last {
			t.Fatalf("count went backwards: %d < %d", s.Total, last)
		}
		last = s.Total
	}
	wg.Wait()
}

func BenchmarkRecord(b *testing.B) {
	h := New()
	v := int64(123456)
	for i := 0; b.Loop(); i++ {
		h.Record(v + int64(i&1023))
	}
}
