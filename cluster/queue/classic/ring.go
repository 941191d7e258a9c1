package classic

// ring is a FIFO deque on a power-of-two circular buffer. Pushing and popping
// allocate nothing once the buffer has grown to the queue's working size; it
// shrinks again when mostly empty so a burst does not pin memory for ever.
type ring[T any] struct {
	buf  []T
	head int // index of the first element
	n    int // number of elements
}

// minRingCap is the smallest buffer a ring keeps; below it shrinking would
// only cause churn.
const minRingCap = 16

func (r *ring[T]) len() int { return r.n }

func (r *ring[T]) push(v T) {
	if r.n == len(r.buf) {
		r.resize(max(minRingCap, 2*len(r.buf)))
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = v
	r.n++
}

// pop removes and returns the first element; ok is false when r is empty.
func (r *ring[T]) pop() (v T, ok bool) {
	if r.n == 0 {
		return v, false
	}
	var zero T
	v = r.buf[r.head]
	r.buf[r.head] = zero // let the garbage collector have what v points to
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	if len(r.buf) > minRingCap && r.n <= len(r.buf)/4 {
		r.resize(len(r.buf) / 2)
	}
	return v, true
}

// removeFirst deletes the first element for which match is true, keeping the
// order of the rest. It is O(n) and meant for rare events such as a cancel.
func (r *ring[T]) removeFirst(match func(T) bool) bool {
	mask := len(r.buf) - 1
	for i := 0; i < r.n; i++ {
		if !match(r.buf[(r.head+i)&mask]) {
			continue
		}
		for j := i; j < r.n-1; j++ {
			r.buf[(r.head+j)&mask] = r.buf[(r.head+j+1)&mask]
		}
		var zero T
		r.buf[(r.head+r.n-1)&mask] = zero
		r.n--
		return true
	}
	return false
}

// each calls f on every element in order.
func (r *ring[T]) each(f func(T)) {
	for i := 0; i < r.n; i++ {
		f(r.buf[(r.head+i)&(len(r.buf)-1)])
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
