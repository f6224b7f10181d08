package ingress

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/replies"
	"github.com/bubbus/bub/pkg/envelope"
)

// ErrUnfinished is what [Gateway.Answer] returns while the turn of an
// inbound envelope has not finished (it runs, waits to run, or never will:
// a steered or dead-lettered message has no done marker).
var ErrUnfinished = errors.New("ingress: the turn has not finished")

// ErrReplyGone is what [Gateway.Answer] returns when a finished turn's
// reply is no longer in its stream (its retention ended first).
var ErrReplyGone = errors.New("ingress: the reply is no longer stored")

// Answer returns the outbound envelopes that answered inbound envelope id,
// in the order they were published, once its turn finished: it reads the
// done marker the worker wrote into the turn registry and fetches the
// replies it names from their stream. State lives in JetStream only, so
// any ingress instance answers, restarted or not. With wait it waits
// until the marker appears or ctx ends; without, it looks once. A turn
// that answered nothing (stopped by ,quit) gives no envelopes and no
// error.
func (g *Gateway) Answer(ctx context.Context, id string, wait bool) ([]envelope.Envelope, error) {
	kv, err := g.js.KeyValue(ctx, g.names.TurnsBucket())
	if err != nil {
		return nil, unfinishedOr(ctx, fmt.Errorf("binding the turn registry: %w", err))
	}
	key := g.names.DoneKey(id)
	if !wait {
		e, err := kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
			return nil, ErrUnfinished
		case err != nil:
			return nil, fmt.Errorf("reading the done marker of %s: %w", id, err)
		}
		return g.stored(ctx, id, e.Value())
	}
	w, err := kv.Watch(ctx, key, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, unfinishedOr(ctx, fmt.Errorf("watching the done marker of %s: %w", id, err))
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return nil, ErrUnfinished
		case e, ok := <-w.Updates():
			switch {
			case !ok:
				return nil, unfinishedOr(ctx, fmt.Errorf("watching the done marker of %s: the watch ended", id))
			case e != nil:
				return g.stored(ctx, id, e.Value())
			}
		}
	}
}

// unfinishedOr is ErrUnfinished when err came from ctx ending, else err.
func unfinishedOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ErrUnfinished
	}
	return err
}

// stored fetches the replies to id that a done marker names.
func (g *Gateway) stored(ctx context.Context, id string, marker []byte) ([]envelope.Envelope, error) {
	done, err := replies.Decode(marker)
	if err != nil {
		return nil, fmt.Errorf("done marker of %s: %w", id, err)
	}
	streams := map[string]jetstream.Stream{}
	outs := make([]envelope.Envelope, 0, len(done.Replies))
	for _, ref := range done.Replies {
		st, ok := streams[ref.Stream]
		if !ok {
			if st, err = g.js.Stream(ctx, ref.Stream); err != nil {
				return nil, fmt.Errorf("binding stream %s: %w", ref.Stream, err)
			}
			streams[ref.Stream] = st
		}
		m, err := st.GetMsg(ctx, ref.Seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, fmt.Errorf("%w: %s sequence %d", ErrReplyGone, ref.Stream, ref.Seq)
		}
		if err != nil {
			return nil, fmt.Errorf("reading reply %s sequence %d: %w", ref.Stream, ref.Seq, err)
		}
		env, err := decodeOutbound(m.Header, m.Data)
		if err != nil {
			return nil, fmt.Errorf("reply %s sequence %d: %w", ref.Stream, ref.Seq, err)
		}
		if env.InReplyTo == id { // as for a first ?wait: what the turn sent elsewhere is not its reply
			outs = append(outs, env)
		}
	}
	return outs, nil
}
