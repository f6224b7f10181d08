package bufpool

import "sync"

var pool = sync.Pool{New: func() any { return new([]byte) }}

// maxKept is the largest buffer Put keeps.
const maxKept = 64 << 10

// Get returns an empty buffer, with the capacity of one put back earlier
// when the pool has one.
func Get() *[]byte {
	b := pool.Get().(*[]byte)
	*b = (*b)[:0]
	return b
}

// Put gives b back for reuse, unless it grew past 64 KiB. b must not be
// used after.
func Put(b *[]byte) {
	if cap(*b) <= maxKept {
		pool.Put(b)
	}
}
