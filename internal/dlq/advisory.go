package dlq

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/pkg/subjects"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// maxDeliveries is the part of the JetStream max-deliveries advisory the
// watcher needs.
type maxDeliveries struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// WatchMaxDeliveries dead-letters the messages of consumer on stream that
// exhausted their deliveries without anyone handling the last one (the
// worker holding it crashed): it subscribes to the server's
// max-deliveries advisory in a queue group (one watcher of the group acts
// per advisory), copies the message, fetched by stream sequence, to
// bub.dlq.max_delivered with its headers, and deletes it from the stream.
// A message the consumer's own handler already terminated is gone by then
// and ignored. The copy's Nats-Msg-Id is derived from the stream sequence,
// so two watchers never store it twice. Stop unsubscribes.
func WatchMaxDeliveries(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, names subjects.Names, stream, consumer string, log *slog.Logger) (stop func(), err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := NewWriter(js, names, log)
	sub, err := nc.QueueSubscribe(names.MaxDeliveriesAdvisory(stream, consumer), names.DLQWatchers(), func(m *nats.Msg) {
		var adv maxDeliveries
		if err := json.Unmarshal(m.Data, &adv); err != nil || adv.StreamSeq == 0 {
			log.Warn("dlq.advisory_undecodable", "err", err)
			return
		}
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := w.deadLetterStored(actx, stream, adv); err != nil {
			log.Error("dlq.max_delivered_failed", "stream", stream, "seq", adv.StreamSeq, "err", err)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("subscribing to max-deliveries advisories: %w", err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// deadLetterStored copies stream message adv.StreamSeq to the dead-letter
// stream and removes it from its stream.
func (w *Writer) deadLetterStored(ctx context.Context, stream string, adv maxDeliveries) error {
	st, err := w.js.Stream(ctx, stream)
	if err != nil {
		return err
	}
	raw, err := st.GetMsg(ctx, adv.StreamSeq)
	if Gone(err) {
		return nil // handled (acked or terminated) meanwhile
	}
	if err != nil {
		return err
	}
	cause := fmt.Errorf("delivered %d times without being acknowledged (the last delivery's worker died)", adv.Deliveries)
	extra := storedCopy(stream, adv.StreamSeq)
	extra[subjects.HeaderDLQDeliveries] = strconv.FormatUint(adv.Deliveries, 10)
	err = w.publish(ctx, raw.Subject, raw.Header, raw.Data, ReasonMaxDelivered, cause, extra)
	if err != nil {
		return err
	}
	w.log.Warn("dlq.max_delivered", "stream", stream, "seq", adv.StreamSeq, "deliveries", adv.Deliveries)
	if err := st.DeleteMsg(ctx, adv.StreamSeq); err != nil && !Gone(err) {
		return fmt.Errorf("removing dead-lettered message %d: %w", adv.StreamSeq, err)
	}
	return nil
}
