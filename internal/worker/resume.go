package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	ce "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/pkg/agent/recording"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/taperec"
)

// This file resumes a redelivered turn from its interrupted run
// (docs/durable.md): the run's events are read back from the events
// stream, republished as the opening of a new run that continues it, and
// handed to the agent as agent.Run.Resume.

// interrupted is the recorded, unfinished run of a redelivered turn.
type interrupted struct {
	run *recording.Run
	raw []ce.Event // in seq order
}

// interruptedRun returns the run an earlier delivery of the turn a
// answers started and did not finish, or finished well but could not
// acknowledge (its worker died between the reply and the ack: resuming it
// replays it without a model call), nil when there is none to resume (the
// first delivery, no run.started recorded, the run failed, or its events
// have a gap). It reads the session's events stored since the
// turn's inbound message was: the run and everything it published come
// after it (other turns of the session may have run in between).
func (rt *Runtime) interruptedRun(ctx context.Context, session string, a events.Answers) (*interrupted, error) {
	if a.Delivery < 2 || a.EnvelopeID == "" || a.InboundSeq == 0 {
		return nil, nil
	}
	inbound, err := rt.o.JS.Stream(ctx, rt.o.Names.InboundStream())
	if err != nil {
		return nil, err
	}
	msg, err := inbound.GetMsg(ctx, a.InboundSeq)
	if err != nil {
		return nil, err
	}
	since := msg.Time
	cons, err := rt.events.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{rt.o.Names.EventsOf(session)},
		DeliverPolicy:  jetstream.DeliverByStartTimePolicy,
		OptStartTime:   &since,
	})
	if err != nil {
		return nil, err
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return nil, err
	}
	var (
		runID   string
		started events.RunStartedData
		byRun   = map[string][]ce.Event{}
	)
	for left := int(info.NumPending); left > 0; {
		batch, err := cons.FetchNoWait(min(left, 256))
		if err != nil {
			return nil, err
		}
		got := 0
		for m := range batch.Messages() {
			got++
			e, err := events.Decode(m.Headers(), m.Data())
			if err != nil || events.RunID(e) == "" {
				continue // not a run's (an undecodable event is the recorder's to dead-letter)
			}
			byRun[events.RunID(e)] = append(byRun[events.RunID(e)], e)
			if e.Type() != events.TypeRunStarted {
				continue
			}
			var d events.RunStartedData
			if events.DecodeData(e, &d) == nil && d.Metadata.EnvelopeID == a.EnvelopeID && d.Metadata.Delivery < a.Delivery && d.Metadata.Delivery >= started.Metadata.Delivery {
				runID, started = events.RunID(e), d
			}
		}
		if err := batch.Error(); err != nil {
			return nil, err
		}
		if got == 0 {
			break
		}
		left -= got
	}
	if runID == "" {
		return nil, nil
	}
	raw := byRun[runID]
	recs := make([]recording.Event, 0, len(raw))
	for _, e := range raw {
		payload, err := events.DecodePayload(e)
		if err != nil && !errors.Is(err, events.ErrUnknownType) {
			return nil, fmt.Errorf("recorded event %s of run %s: %w", e.ID(), runID, err)
		}
		recs = append(recs, recording.Event{Seq: events.Seq(e), Type: e.Type(), Payload: payload})
	}
	run, err := recording.New(runID, recs)
	if err != nil {
		rt.log.Warn("worker.resume_impossible", "run", runID, "session", session, "err", err)
		return nil, nil
	}
	if run.Started == nil || run.Finished != nil && run.Finished.Status != events.RunOK {
		return nil, nil // a failed run is retried from the start
	}
	slices.SortStableFunc(raw, func(x, y ce.Event) int { return int(events.Seq(x) - events.Seq(y)) })
	return &interrupted{run: run, raw: raw}, nil
}

// resume opens the new run rtape with the interrupted run's events: it
// republishes them under the new run id (run.started now names the run it
// resumes and this delivery) and applies them to the run's tape fork, as
// the recorder will apply the copies.
func (rt *Runtime) resume(ctx context.Context, rtape *runTape, from *interrupted, a events.Answers) error {
	for _, e := range from.raw {
		payload, err := events.DecodePayload(e)
		if err != nil {
			continue
		}
		if err := taperec.Map(payload, rtape.meta.RunID, e.Time()).Apply(ctx, rtape.fork, rtape.session); err != nil {
			return err
		}
	}
	return rtape.att.Republish(ctx, rtape.meta.RunID, from.raw, func(e ce.Event) (any, error) {
		if e.Type() != events.TypeRunStarted {
			return nil, nil
		}
		var d events.RunStartedData
		if err := events.DecodeData(e, &d); err != nil {
			return nil, err
		}
		d.Metadata.Resumes, d.Metadata.Delivery = from.run.ID, a.Delivery
		b, err := json.Marshal(d)
		return json.RawMessage(b), err
	})
}
