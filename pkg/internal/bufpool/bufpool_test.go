package bufpool

import "testing"

func TestGetIsEmptyAndPutDropsLargeBuffers(t *testing.T) {
	b := Get()
	*b = append(*b, "abc"...)
	Put(b)
	if got := Get(); len(*got) != 0 {
		t.Fatalf("Get returned %q, want an empty buffer", *got)
	}
	big := Get()
	*big = make([]byte, 0, maxKept+1)
	Put(big)
	for range 100 { // the pool may drop buffers, never hand back one it should not keep
		if got := Get(); cap(*got) > maxKept {
			t.Fatalf("Get returned a buffer of capacity %d, past %d", cap(*got), maxKept)
		}
	}
}
