package bench

import (
	"context"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// What JetStream stores per turn, from the streams' state before and after
// a window: messages are the growth of the streams' last sequences (every
// message a stream ever stored, including those a work queue or a KV
// bucket's history removed again), bytes the growth of the bytes the
// streams hold. The real pipeline's streams and the simulation's
// (simPrefix) are told apart by name.

// storedTotals sums the last sequences and held bytes of every stream of
// one side (the simulation's when sim).
type storedTotals struct{ msgs, bytes uint64 }

func streamTotals(ctx context.Context, js jetstream.JetStream, sim bool) (storedTotals, error) {
	var t storedTotals
	l := js.ListStreams(ctx)
	for info := range l.Info() {
		if isSimStream(info.Config.Name) != sim {
			continue
		}
		t.msgs += info.State.LastSeq
		t.bytes += info.State.Bytes
	}
	if err := l.Err(); err != nil {
		return t, fmt.Errorf("listing streams: %w", err)
	}
	return t, nil
}

// isSimStream reports a stream (or KV bucket) of the simulation.
func isSimStream(name string) bool { return strings.Contains(strings.ToLower(name), simPrefix) }

// perTurn returns the growth from t0 to t per turn.
func (t storedTotals) perTurn(t0 storedTotals, turns int) (msgs, bytes float64) {
	if turns == 0 {
		return 0, 0
	}
	return float64(t.msgs-t0.msgs) / float64(turns), float64(int64(t.bytes)-int64(t0.bytes)) / float64(turns)
}

// storedSamples collects the per-turn figures of the windows of P3.
type storedSamples struct {
	realMsgs, realBytes, simMsgs, simBytes []float64
}

func (s *storedSamples) add(sim bool, msgs, bytes float64) {
	if sim {
		s.simMsgs, s.simBytes = append(s.simMsgs, msgs), append(s.simBytes, bytes)
		return
	}
	s.realMsgs, s.realBytes = append(s.realMsgs, msgs), append(s.realBytes, bytes)
}

// rows are the two rows of id: messages and bytes stored per turn beside
// the simulation's.
func (s *storedSamples) rows(id string) []Row {
	mk := func(what string, unit Unit, fig, lim []float64) Row {
		return Row{
			ID: id, Figure: "JetStream " + what + " per fully recorded turn (all streams and KV buckets, from their state around each P3 window)",
			Value: Summarize(fig), Unit: unit,
			LimitName: "the simulation's streams over its windows (same pattern)", Limit: Summarize(lim),
			Ratio: Summarize(ratios(fig, lim)), Result: Info,
		}
	}
	return []Row{
		mk("messages stored (growth of last sequences)", Count, s.realMsgs, s.simMsgs),
		mk("bytes held (growth of stream bytes, after work-queue and KV-history removals)", Bytes, s.realBytes, s.simBytes),
	}
}
