package recorder

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/pkg/subjects"
)

// waitPoll is how often WaitCaughtUp asks for the consumer's state.
const waitPoll = 5 * time.Millisecond

// WaitCaughtUp waits until the recorder of the deployment names has taken
// and acknowledged every lifecycle event published so far (its durable
// consumer has nothing pending), or ctx ends.
func WaitCaughtUp(ctx context.Context, js jetstream.JetStream, names subjects.Names) error {
	cons, err := js.Consumer(ctx, names.EventsStream(), names.RecorderConsumer())
	if err != nil {
		return err
	}
	// The consumer counts a newly stored event as pending a moment after
	// the publish is acknowledged, so "nothing pending" alone can be said
	// of events already published: the consumer must also have delivered
	// the stream's last event as of now (it takes every event).
	stream, err := js.Stream(ctx, names.EventsStream())
	if err != nil {
		return err
	}
	last := stream.CachedInfo().State.LastSeq
	t := time.NewTicker(waitPoll)
	defer t.Stop()
	for {
		info, err := cons.Info(ctx)
		if err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.Delivered.Stream >= last {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the recorder: %w", ctx.Err())
		case <-t.C:
		}
	}
}
