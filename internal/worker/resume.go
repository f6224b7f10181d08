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
// answers started and never finished, nil when there is none to resume
// (the first delivery, no run.started recorded, the run finished, or its
// events have a gap). The session's turns run one at a time, so the run
// is the session's newest run.started.
func (rt *Runtime) interruptedRun(ctx context.Context, session string, a events.Answers) (*interrupted, error) {
	if a.Delivery < 2 || a.EnvelopeID == "" || rt.o.JS == nil {
		return nil, nil
	}
	st, err := rt.o.JS.Stream(ctx, rt.o.Names.EventsStream())
	if err != nil {
		return nil, err
	}
	last, err := st.GetLastMsgForSubject(ctx, rt.o.Names.Event(session, events.SubjectName(events.TypeRunStarted)))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	start, err := events.Decode(last.Header, last.Data)
	if err != nil {
		return nil, err
	}
	var started events.RunStartedData
	if err := events.DecodeData(start, &started); err != nil {
		return nil, err
	}
	if started.Metadata.EnvelopeID != a.EnvelopeID || started.Metadata.Delivery >= a.Delivery {
		return nil, nil
	}
	runID := events.RunID(start)
	var (
		raw  []ce.Event
		recs []recording.Event
	)
	for next := last.Sequence; ; {
		m, err := st.GetMsg(ctx, next, jetstream.WithGetMsgSubject(rt.o.Names.EventsOf(session)))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return nil, err
		}
		next = m.Sequence + 1
		e, err := events.Decode(m.Header, m.Data)
		if err != nil || events.RunID(e) != runID {
			continue // not the run's (an undecodable event is the recorder's to dead-letter)
		}
		payload, err := events.DecodePayload(e)
		if err != nil && !errors.Is(err, events.ErrUnknownType) {
			return nil, fmt.Errorf("recorded event %s of run %s: %w", e.ID(), runID, err)
		}
		raw = append(raw, e)
		recs = append(recs, recording.Event{Seq: events.Seq(e), Type: e.Type(), Payload: payload})
	}
	// The run's events before its run.started (the bootstrap anchor) were
	// stored just before it: read them back too, looking back a bounded
	// number of messages.
	for seq, looked := last.Sequence, 0; len(recs) > 0 && recs[0].Seq > 1 && seq > 1 && looked < maxLookBack; looked++ {
		seq--
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			continue // deleted or purged
		}
		e, err := events.Decode(m.Header, m.Data)
		if err != nil || events.RunID(e) != runID {
			continue
		}
		payload, _ := events.DecodePayload(e)
		raw = append([]ce.Event{e}, raw...)
		recs = append([]recording.Event{{Seq: events.Seq(e), Type: e.Type(), Payload: payload}}, recs...)
	}
	run, err := recording.New(runID, recs)
	if err != nil {
		rt.log.Warn("worker.resume_impossible", "run", runID, "session", session, "err", err)
		return nil, nil
	}
	if run.Finished != nil || run.Started == nil {
		return nil, nil
	}
	slices.SortStableFunc(raw, func(x, y ce.Event) int { return int(events.Seq(x) - events.Seq(y)) })
	return &interrupted{run: run, raw: raw}, nil
}

// maxLookBack bounds the messages read back before an interrupted run's
// run.started for its earlier events.
const maxLookBack = 64

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
		if err := rtape.apply(ctx, taperec.Map(payload, rtape.meta.RunID, e.Time())); err != nil {
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
