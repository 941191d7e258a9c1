package raftq

// ring is a FIFO deque on a power-of-two circular buffer. Pushing and popping
// allocate nothing once the buffer has grown to the working size; it shrinks
// again when mostly empty, so a burst does not pin memory for ever.
type ring[T any] struct {
	buf  []T
	head int // index of the first element
	n    int // number of elements
}

// minRingCap is the smallest buffer a ring allocates; shrinkRingCap the
// size above which a mostly empty ring halves its buffer. Below it a ring
// keeps its buffer, so one that fills and drains in cycles (a consumer's
// deliveries between multiple acks) does not reallocate every cycle.
const (
	minRingCap    = 8
	shrinkRingCap = 256
)

func (r *ring[T]) len() int { return r.n }

func (r *ring[T]) push(v T) {
	if r.n == len(r.buf) {
		r.resize(max(minRingCap, 2*len(r.buf)))
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = v
	r.n++
}

// peek returns the first element; r must not be empty.
func (r *ring[T]) peek() *T { return &r.buf[r.head] }

// at returns the i-th element from the front; 0 <= i < r.len().
func (r *ring[T]) at(i int) *T { return &r.buf[(r.head+i)&(len(r.buf)-1)] }

// pop removes and returns the first element; r must not be empty.
func (r *ring[T]) pop() T {
	var zero T
	v := r.buf[r.head]
	r.buf[r.head] = zero
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	if len(r.buf) > shrinkRingCap && r.n <= len(r.buf)/4 {
		r.resize(len(r.buf) / 2)
	}
	return v
}

// filter keeps, in order, the elements for which keep is true.
func (r *ring[T]) filter(keep func(*T) bool) {
	j := 0
	for i := 0; i < r.n; i++ {
		if v := r.at(i); keep(v) {
			*r.at(j) = *v
			j++
		}
	}
	var zero T
	for i := j; i < r.n; i++ {
		*r.at(i) = zero
	}
	r.n = j
	c := len(r.buf)
	for c > shrinkRingCap && r.n <= c/4 {
		c /= 2
	}
	if c != len(r.buf) {
		r.resize(c)
	}
}

// reset empties r and releases its buffer.
func (r *ring[T]) reset() { *r = ring[T]{} }

func (r *ring[T]) resize(capacity int) {
	buf := make([]T, capacity)
	for i := 0; i < r.n; i++ {
		buf[i] = r.buf[(r.head+i)&(len(r.buf)-1)]
	}
	r.buf, r.head = buf, 0
}
