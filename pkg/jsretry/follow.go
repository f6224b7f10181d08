package jsretry

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// followInactive is how long the server keeps a consumer of [Follow]
// nobody pulls from (its reader stopped or died).
const followInactive = time.Minute

// Follow hands handle every message of stream on subject filter, in
// stream order, from stream sequence from (at least 1) on, with the
// message's stream sequence, until the returned stop is called. It reads them as the library's ordered
// consumer does: an ephemeral in-memory consumer of one replica without
// acknowledgements, made again from the next sequence when it is lost or
// a delivery is missed, so nothing is skipped or handed over twice.
//
// What differs is how fast it comes back on a cluster. It notices a lost
// consumer within two [PullHeartbeat]s, and makes it again in attempts
// of [ReadAttempt], retried until one succeeds. The library's ordered
// consumer spends 10s on each attempt; while a killed server's meta
// leadership is being elected nobody answers one, so every reader whose
// consumer lived on that server stalled for 10s past the election.
//
// The first consumer is made before Follow returns, within [ReadBound]
// and ctx; it follows until ctx ends or stop is called. handle runs on
// one goroutine, never after stop returned. Later errors go to warn,
// which may be nil.
func Follow(ctx context.Context, js jetstream.JetStream, stream, filter string, from uint64, handle func(m jetstream.Msg, seq uint64), warn func(error)) (stop func(), err error) {
	if warn == nil {
		warn = func(error) {}
	}
	f := &follower{js: js, stream: stream, filter: filter, next: max(from, 1), handle: handle, warn: warn}
	ctx, cancel := context.WithCancel(ctx)
	if err := Read(ctx, f.create); err != nil {
		cancel()
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.run(ctx)
	}()
	return func() { cancel(); <-done }, nil
}

type follower struct {
	js             jetstream.JetStream
	stream, filter string
	next           uint64 // the stream sequence to hand over next
	handle         func(jetstream.Msg, uint64)
	warn           func(error)
	cons           jetstream.Consumer
}

func (f *follower) create(ctx context.Context) (err error) {
	f.cons, err = f.js.CreateConsumer(ctx, f.stream, jetstream.ConsumerConfig{
		FilterSubject:     f.filter,
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       f.next,
		AckPolicy:         jetstream.AckNonePolicy,
		MemoryStorage:     true,
		Replicas:          1,
		InactiveThreshold: followInactive,
	})
	return err
}

// run reads until ctx ends, making the consumer again each time it is
// lost.
func (f *follower) run(ctx context.Context) {
	for {
		f.read(ctx)
		lost := f.cons.CachedInfo().Name
		go func() { // best effort: the server drops it when inactive anyway
			dctx, cancel := context.WithTimeout(context.Background(), ReadAttempt)
			defer cancel()
			_ = f.js.DeleteConsumer(dctx, f.stream, lost)
		}()
		for {
			if ctx.Err() != nil {
				return
			}
			actx, cancel := context.WithTimeout(ctx, ReadAttempt)
			err := f.create(actx)
			cancel()
			if err == nil {
				break
			}
			if ctx.Err() == nil {
				f.warn(err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(readBackoff.Max):
			}
		}
	}
}

// read hands over what the current consumer delivers until it fails, a
// delivery is missing or ctx ends.
func (f *follower) read(ctx context.Context) {
	it, err := f.cons.Messages(PullOptions(256)...)
	if err != nil {
		f.warn(err)
		return
	}
	defer context.AfterFunc(ctx, it.Stop)()
	defer it.Stop()
	var delivered uint64
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				f.warn(err)
			}
			return
		}
		md, err := m.Metadata()
		if err != nil {
			f.warn(err)
			return
		}
		if md.Sequence.Consumer != delivered+1 {
			return // a delivery went missing: start again from f.next
		}
		delivered, f.next = md.Sequence.Consumer, md.Sequence.Stream+1
		f.handle(m, md.Sequence.Stream)
	}
}
