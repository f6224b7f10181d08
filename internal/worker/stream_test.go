package worker

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/pkg/llm"
)

func deltas(texts ...string) func(ctx context.Context, emit func(llm.Delta)) error {
	return func(ctx context.Context, emit func(llm.Delta)) error {
		for _, s := range texts {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			emit(llm.Delta{Kind: "text", Text: s})
		}
		return nil
	}
}

func TestRunStreamYieldsEveryDeltaInOrder(t *testing.T) {
	var got []string
	for d, err := range runStream(t.Context(), deltas("a", "b", "c")) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d.Text)
	}
	if !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("got %v", got)
	}
}

func TestRunStreamYieldsTheRunsErrorLast(t *testing.T) {
	boom := errors.New("boom")
	var got []string
	var last error
	for d, err := range runStream(t.Context(), func(ctx context.Context, emit func(llm.Delta)) error {
		emit(llm.Delta{Text: "a"})
		return boom
	}) {
		if err != nil {
			last = err
			continue
		}
		got = append(got, d.Text)
	}
	if !slices.Equal(got, []string{"a"}) || !errors.Is(last, boom) {
		t.Fatalf("got %v then %v, want [a] then boom", got, last)
	}
}

// Breaking out cancels the run; deltas it emits afterwards are dropped
// (yielding them would panic the range loop) and the run is waited for.
func TestRunStreamBreakCancelsTheRun(t *testing.T) {
	var runCtxErr error
	ended := false
	run := func(ctx context.Context, emit func(llm.Delta)) error {
		emit(llm.Delta{Text: "a"})
		emit(llm.Delta{Text: "b"}) // after the break: dropped
		runCtxErr = ctx.Err()
		ended = true
		return ctx.Err()
	}
	var got []string
	for d := range runStream(t.Context(), run) {
		got = append(got, d.Text)
		break
	}
	if !slices.Equal(got, []string{"a"}) || !errors.Is(runCtxErr, context.Canceled) || !ended {
		t.Fatalf("got %v, run context %v, ended %v", got, runCtxErr, ended)
	}
}

// A turn longer than the ack wait is not redelivered while keepAlive
// runs, is redelivered once it stopped, and no in-progress ack follows
// stop.
func TestKeepAliveHoldsTheMessageUntilStopped(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.JetStream(t)
	ctx := t.Context()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t"}, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	c, err := js.CreateConsumer(ctx, "T", jetstream.ConsumerConfig{Durable: "c", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "t", []byte("x")); err != nil {
		t.Fatal(err)
	}
	next := func(wait time.Duration) jetstream.Msg {
		b, err := c.Fetch(1, jetstream.FetchMaxWait(wait))
		if err != nil {
			t.Fatal(err)
		}
		for m := range b.Messages() {
			return m
		}
		return nil
	}
	msg := next(time.Second)
	if msg == nil {
		t.Fatal("no message")
	}
	stop := keepAlive(msg, 250*time.Millisecond)
	if again := next(2500 * time.Millisecond); again != nil {
		t.Fatal("redelivered while kept alive")
	}
	stop()
	again := next(3 * time.Second)
	if again == nil {
		t.Fatal("not redelivered after keepAlive stopped")
	}
	if md, err := again.Metadata(); err != nil || md.NumDelivered != 2 {
		t.Fatalf("metadata %+v %v, want the second delivery", md, err)
	}
}
