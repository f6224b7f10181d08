package recorder_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bubbus/bub/internal/recorder"
	"github.com/bubbus/bub/pkg/tape"
)

// TestWaitCaughtUp: with events the recorder has not taken WaitCaughtUp
// waits until ctx ends; once a recorder runs it returns when the run is
// committed and every event acknowledged.
func TestWaitCaughtUp(t *testing.T) {
	f := setup(t)
	if err := recorder.WaitCaughtUp(t.Context(), f.js, f.names); err != nil {
		t.Fatalf("nothing published: %v", err)
	}
	r := newRun("s1", "env-1", 1, "hi", "hello")
	f.publish(t, r, []int{0, 1, 2, 3, 4}, map[int]string{}, false)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if err := recorder.WaitCaughtUp(ctx, f.js, f.names); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("no recorder running: %v, want a deadline error", err)
	}
	f.startRecorder(t, recorder.Config{})
	ctx, cancel = context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	if err := recorder.WaitCaughtUp(ctx, f.js, f.names); err != nil {
		t.Fatal(err)
	}
	entries, err := f.store.Fetch(t.Context(), "s1", tape.All())
	if err != nil || kinds(entries) != oneRun {
		t.Fatalf("tape once caught up = %s (%v), want %s", kinds(entries), err, oneRun)
	}
}
