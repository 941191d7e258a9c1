// Package hist is a small HDR-style (log-linear) latency histogram.
//
// Values (nanoseconds) are bucketed by their top subBits+1 significant bits: below 2^(subBits+1)
// every integer has its own bucket, above that every power-of-two range [2^k, 2^(k+1)) is split
// into 2^subBits equal buckets. A bucket is therefore at most 1/2^subBits = 1/128 of its lower
// bound wide, and reporting its midpoint is within 1/256 (≈0.4%) of any value it holds: well
// inside the 1% error budget, at a fixed 38 KiB per histogram and O(1) recording.
//
// A Histogram has exactly one writer (the producer or consumer goroutine that owns it) and any
// number of concurrent readers (the once-a-second reporter). Counts are atomics so reading a
// Snapshot never blocks or slows the writer; there is no lock anywhere and no sharing between
// writers, so recording does not become the bottleneck the tool is trying to measure.
package hist

import (
	"math"
	"math/bits"
	"sync/atomic"
)

const (
	// subBits sets the precision: 2^subBits sub-buckets per power of two.
	subBits  = 7
	subCount = 1 << subBits
	// maxBits bounds the trackable range to 2^44 ns ≈ 4.9 h; larger values land in the last
	// bucket (Max still records them exactly). It keeps a histogram at 38 KiB, not 58.
	maxBits = 44
	// MaxValue is the largest value recorded without clamping.
	MaxValue = 1<<maxBits - 1
	// NumBuckets is the number of buckets needed to cover [0, MaxValue].
	NumBuckets = (maxBits-subBits-1)*subCount + 2*subCount
)

// bucketOf maps a non-negative value to its bucket index.
func bucketOf(v int64) int {
	if v < 2*subCount {
		return int(v)
	}
	if v > MaxValue {
		v = MaxValue
	}
	shift := bits.Len64(uint64(v)) - subBits - 1
	// v>>shift is the mantissa in [subCount, 2*subCount); each shift adds one octave of
	// subCount buckets, which keeps the index space contiguous with the exact range below.
	return shift*subCount + int(v>>shift)
}

// bucketRange returns the smallest value of bucket i and the bucket's width.
func bucketRange(i int) (lo, width int64) {
	if i < 2*subCount {
		return int64(i), 1
	}
	shift := i/subCount - 1
	m := int64(i - shift*subCount)
	return m << shift, 1 << shift
}

// Histogram records values from a single goroutine; Snapshot may be called concurrently.
type Histogram struct {
	counts [NumBuckets]atomic.Uint64
	// min and max are only ever stored by the single writer, so load-compare-store is enough
	// (no CAS loop); readers see them atomically.
	min, max atomic.Int64
}

// New returns an empty histogram.
func New() *Histogram {
	h := &Histogram{}
	h.min.Store(math.MaxInt64)
	h.max.Store(math.MinInt64)
	return h
}

// Record adds one value. Negative values (a clock step, a foreign timestamp) count as 0.
// Only the owning goroutine may call Record.
func (h *Histogram) Record(v int64) {
	if v < 0 {
		v = 0
	}
	h.counts[bucketOf(v)].Add(1)
	if v < h.min.Load() {
		h.min.Store(v)
	}
	if v > h.max.Load() {
		h.max.Store(v)
	}
}

// Snapshot is a plain (non-atomic) copy of histogram counts that can be merged, subtracted and
// queried. The zero value is an empty snapshot.
type Snapshot struct {
	Counts [NumBuckets]uint64
	Total  uint64
	// Min and Max are exact for snapshots of a histogram and merges of those; for a difference
	// of snapshots they are the bounds of the lowest and highest non-empty buckets.
	Min, Max int64
}

// AddTo adds the histogram's current counts into s. Taken while the writer runs, the copy is
// not a single instant but every count it holds was really recorded, which is all a
// once-a-second progress line needs.
func (h *Histogram) AddTo(s *Snapshot) {
	var total uint64
	for i := range h.counts {
		c := h.counts[i].Load()
		s.Counts[i] += c
		total += c
	}
	if total == 0 {
		return
	}
	// Min/max are loaded after the counts, so they already cover every counted value.
	mn, mx := h.min.Load(), h.max.Load()
	if s.Total == 0 || mn < s.Min {
		s.Min = mn
	}
	if s.Total == 0 || mx > s.Max {
		s.Max = mx
	}
	s.Total += total
}

// Merge adds the counts of o into s.
func (s *Snapshot) Merge(o *Snapshot) {
	if o.Total == 0 {
		return
	}
	for i, c := range o.Counts {
		s.Counts[i] += c
	}
	if s.Total == 0 || o.Min < s.Min {
		s.Min = o.Min
	}
	if s.Total == 0 || o.Max > s.Max {
		s.Max = o.Max
	}
	s.Total += o.Total
}

// Delta stores cur minus prev in s: the values recorded between two cumulative snapshots.
func (s *Snapshot) Delta(cur, prev *Snapshot) {
	s.Total = 0
	lowest, highest := -1, -1
	for i := range s.Counts {
		d := cur.Counts[i] - prev.Counts[i]
		s.Counts[i] = d
		if d != 0 {
			if lowest < 0 {
				lowest = i
			}
			highest = i
			s.Total += d
		}
	}
	s.Min, s.Max = 0, 0
	if s.Total == 0 {
		return
	}
	lo, _ := bucketRange(lowest)
	hlo, hw := bucketRange(highest)
	s.Min, s.Max = max(lo, cur.Min), min(hlo+hw-1, cur.Max)
}

// Quantile returns the value at quantile q in [0, 1]: the smallest recorded value such that at
// least q of all values are ≤ it (q=0 gives Min, q=1 gives Max). It returns 0 when empty.
func (s *Snapshot) Quantile(q float64) int64 {
	if s.Total == 0 {
		return 0
	}
	if q <= 0 {
		return s.Min
	}
	if q >= 1 {
		return s.Max
	}
	rank := uint64(math.Ceil(q * float64(s.Total)))
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i, c := range s.Counts {
		seen += c
		if seen >= rank {
			lo, w := bucketRange(i)
			v := lo + (w-1)/2 // the midpoint halves the worst-case error
			// Clamping to the exact extremes makes p0/p100 exact and keeps the estimate
			// inside the data when the extreme bucket is only partly used.
			return min(max(v, s.Min), s.Max)
		}
	}
	return s.Max
}

// Mean returns the approximate mean (bucket midpoints), 0 when empty.
func (s *Snapshot) Mean() float64 {
	if s.Total == 0 {
		return 0
	}
	var sum float64
	for i, c := range s.Counts {
		if c != 0 {
			lo, w := bucketRange(i)
			sum += float64(c) * (float64(lo) + float64(w-1)/2)
		}
	}
	return sum / float64(s.Total)
}
