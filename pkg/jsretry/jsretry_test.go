package jsretry

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestTransient(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{context.DeadlineExceeded, true},
		{fmt.Errorf("reading: %w", nats.ErrNoResponders), true},
		{jetstream.ErrNoStreamResponse, true},
		{fmt.Errorf("reading stream: %w", nats.ErrDisconnected), true},
		{&jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamNameInUse}, true},
		{&jetstream.APIError{Code: 400, ErrorCode: errCodeReconfigureInProgress}, true},
		{&jetstream.APIError{Code: 503, ErrorCode: 10008}, true},
		{&jetstream.APIError{Code: 400, ErrorCode: errCodeBatchIncomplete}, true},
		{&jetstream.APIError{Code: 429, ErrorCode: errCodeBatchTooManyInflight}, true},
		{&jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeBadRequest}, false},
		{errors.New("boom"), false},
	} {
		if got := Transient(c.err); got != c.want {
			t.Errorf("Transient(%v) = %v", c.err, got)
		}
	}
}

// TestDo: transient errors are retried until op succeeds; a permanent one
// ends at once; the deadline bounds the retries.
func TestDo(t *testing.T) {
	b := Backoff{First: time.Millisecond, Max: 4 * time.Millisecond}
	ctx := context.Background()
	calls, retries := 0, 0
	err := b.Do(ctx, time.Now().Add(time.Minute), func(int, time.Duration, error) { retries++ }, func(context.Context) error {
		if calls++; calls < 4 {
			return nats.ErrNoResponders
		}
		return nil
	})
	if err != nil || calls != 4 || retries != 3 {
		t.Fatalf("retried to success: err %v, %d calls, %d retries", err, calls, retries)
	}
	calls = 0
	boom := errors.New("boom")
	if err := b.Do(ctx, time.Now().Add(time.Minute), nil, func(context.Context) error { calls++; return boom }); err != boom || calls != 1 {
		t.Fatalf("permanent error: %v after %d calls", err, calls)
	}
	start := time.Now()
	err = b.Do(ctx, start.Add(50*time.Millisecond), nil, func(context.Context) error { return nats.ErrNoResponders })
	if !errors.Is(err, nats.ErrNoResponders) || time.Since(start) > time.Second {
		t.Fatalf("bounded: %v after %v", err, time.Since(start))
	}
}

// TestWait: the n-th wait is First doubled n-1 times, capped at Max, and
// jittered to 0.5–1.5 of that.
func TestWait(t *testing.T) {
	b := Backoff{First: 10 * time.Millisecond, Max: 40 * time.Millisecond}
	for n, base := range map[int]time.Duration{1: 10 * time.Millisecond, 2: 20 * time.Millisecond, 3: 40 * time.Millisecond, 9: 40 * time.Millisecond} {
		for range 50 {
			if w := b.Wait(n); w < base/2 || w >= base*3/2 {
				t.Fatalf("Wait(%d) = %v, want within [%v, %v)", n, w, base/2, base*3/2)
			}
		}
	}
}

// TestSleep: Sleep waits about Wait(n) and returns nil, or returns the
// context's error as soon as it ends.
func TestSleep(t *testing.T) {
	b := Backoff{First: 20 * time.Millisecond, Max: 20 * time.Millisecond}
	start := time.Now()
	if err := b.Sleep(t.Context(), 1); err != nil || time.Since(start) < 10*time.Millisecond {
		t.Fatalf("Sleep = %v after %v, want nil after at least 10ms", err, time.Since(start))
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	long := Backoff{First: time.Hour, Max: time.Hour}
	if err := long.Sleep(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on an ended context = %v, want context.Canceled", err)
	}
}
