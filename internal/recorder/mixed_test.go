package recorder_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/bubbus/bub/internal/recorder"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/subjects"
)

// runKinds are the tape entries each event of newRun's run records, by
// index.
var runKinds = []string{"event:loop.start", "event:loop.step.start", "message:user message:assistant event:run", "event:loop.step", "event:loop.finish"}

// TestShuffledDuplicatedAndInvalidEventsOfManyRuns: the events of many
// runs arrive interleaved, each run's in a random order, some stored
// twice, one of some runs with data that does not decode (dead-lettered),
// and half of them only after the held runs went through several sweeps.
// Every run is recorded once, in seq order, with the entries of each of
// its events that decoded, and every session's events watermark passes
// its newest event, a second copy too (seeded, so a failure repeats).
func TestShuffledDuplicatedAndInvalidEventsOfManyRuns(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { mixedRuns(t, seed) })
	}
}

func mixedRuns(t *testing.T, seed uint64) {
	f := setup(t)
	f.startRecorder(t, recorder.Config{Sweep: 5 * time.Millisecond})
	rng := rand.New(rand.NewPCG(seed, 41))
	type send struct {
		r       *runEvents
		i       int
		corrupt bool
	}
	var (
		sends []send
		want  = map[string]string{}
	)
	for n := range 16 {
		r := newRun(fmt.Sprintf("mixed-%d", n), fmt.Sprintf("env-m%d", n), uint64(n+1), "hi", "hello")
		bad := -1
		if n%3 != 0 {
			bad = rng.IntN(len(r.list))
		}
		var parts []string
		for i := range r.list {
			if i != bad {
				parts = append(parts, runKinds[i])
			}
			sends = append(sends, send{r: r, i: i, corrupt: i == bad})
			if rng.IntN(4) == 0 {
				sends = append(sends, send{r: r, i: i, corrupt: i == bad}) // stored twice
			}
		}
		want[r.session] = strings.Join(parts, " ")
	}
	rng.Shuffle(len(sends), func(a, b int) { sends[a], sends[b] = sends[b], sends[a] })
	ids := map[*runEvents]map[int]string{}
	newest := map[string]uint64{} // the stream sequence of each session's newest event
	for k, s := range sends {
		if k == len(sends)/2 {
			time.Sleep(50 * time.Millisecond) // the held runs go through about ten sweeps
		}
		if ids[s.r] == nil {
			ids[s.r] = map[int]string{}
		}
		newest[s.r.session] = f.publishOne(t, s.r, s.i, ids[s.r], s.corrupt)
	}
	for session, w := range want {
		if got := kinds(f.settledAt(t, session, newest[session])); got != w {
			t.Errorf("%s: tape = %s\nwant %s", session, got, w)
		}
	}
}

// publishOne sends event i of r (seq i+1) with id ids[i] (made on first
// use) and no Nats-Msg-Id, so a second send is stored twice; corrupt
// replaces its data with a JSON string, which no event's data decodes
// from. It returns the event's stream sequence.
func (f *fixture) publishOne(t *testing.T, r *runEvents, i int, ids map[int]string, corrupt bool) uint64 {
	t.Helper()
	if ids[i] == "" {
		ids[i] = events.NewID()
	}
	ce, err := events.ToCloudEvent(r.list[i], events.Attrs{ID: ids[i], Source: "/bub/worker/test", SessionID: r.session, RunID: r.id, Seq: int64(i + 1)})
	if err != nil {
		t.Fatal(err)
	}
	if corrupt {
		ce.DataEncoded = []byte(`"corrupt"`)
	}
	msg, err := events.ToMsg(f.names.Event(r.session, events.SubjectName(ce.Type())), ce)
	if err != nil {
		t.Fatal(err)
	}
	msg.Header.Del(subjects.HeaderMsgID)
	ack, err := f.js.PublishMsg(context.Background(), msg)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}
