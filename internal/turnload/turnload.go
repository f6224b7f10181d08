package turnload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/jsretry"
	"github.com/bubbus/bub/pkg/subjects"
	"github.com/bubbus/bub/pkg/tape"
)

// Load sizes one scenario's traffic.
type Load struct {
	Turns, Sessions int
	Rate            float64 // turns per second
}

// FromEnv returns def with the variables <prefix>_TURNS, <prefix>_SESSIONS
// and <prefix>_RATE applied (e.g. BUB_CHAOS_TURNS); a bad value fails the
// test.
func FromEnv(t *testing.T, prefix string, def Load) Load {
	t.Helper()
	l := def
	num := func(key string, p *int) {
		if v := os.Getenv(key); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				t.Fatalf("%s=%q: want a positive number", key, v)
			}
			*p = n
		}
	}
	num(prefix+"_TURNS", &l.Turns)
	num(prefix+"_SESSIONS", &l.Sessions)
	if v := os.Getenv(prefix + "_RATE"); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || r <= 0 {
			t.Fatalf("%s_RATE=%q: want turns per second", prefix, v)
		}
		l.Rate = r
	}
	return l
}

// Turn is one message of the load.
type Turn struct {
	ID, Session string
}

// marker starts the content of every turn; the tape accounting finds the
// turn's id after it.
const marker = "load turn "

// Content is the message text of the turn.
func (tr Turn) Content() string { return marker + tr.ID + "." }

// Target is the deployment a scenario runs on.
type Target struct {
	// Name names the scenario; turn ids and sessions derive from it.
	Name string
	// Web is ingress's base URL (http://host:port).
	Web string
	// JS reads the replies, the tapes, the recorder's consumer and the
	// dead letters.
	JS jetstream.JetStream
}

func (g Target) session(i int, l Load) string { return fmt.Sprintf("%s:s%02d", g.Name, i%l.Sessions) }

// send posts every turn at the load's rate; a failed post is retried
// with the same id (ingress deduplicates) until accepted. It returns when
// every turn was accepted.
func (g Target) send(t *testing.T, l Load) []Turn {
	turns := make([]Turn, l.Turns)
	for i := range turns {
		turns[i] = Turn{ID: fmt.Sprintf("%s-%05d", g.Name, i), Session: g.session(i, l)}
	}
	interval := time.Duration(float64(time.Second) / l.Rate)
	var wg sync.WaitGroup
	var failures atomic.Int64
	start := time.Now()
	for i, tr := range turns {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d) // pacing the load generator, not waiting for a condition
		}
		wg.Go(func() {
			deadline := time.Now().Add(3 * time.Minute)
			for {
				if err := g.post(tr); err == nil {
					return
				} else if time.Now().After(deadline) {
					t.Errorf("turn %s never accepted: %v", tr.ID, err)
					return
				}
				failures.Add(1)
				time.Sleep(200 * time.Millisecond) // client retry backoff
			}
		})
	}
	wg.Wait()
	if n := failures.Load(); n > 0 {
		t.Logf("%s: %d posts retried", g.Name, n)
	}
	return turns
}

func (g Target) post(tr Turn) error {
	b, _ := json.Marshal(map[string]any{"id": tr.ID, "content": tr.Content(), "session_id": tr.Session})
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Post(g.Web+"/v1/messages", "application/json", bytes.NewReader(b))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST: %s", resp.Status)
	}
	return nil
}

// Result is what a scenario measured.
type Result struct {
	Sent, Replied, Duplicates, Lost, Errors int
	TapeExpected, TapeFound, TapeDuplicates int
	Interrupted, DeadLetters, Held          int
	Actions                                 int
	// StaleWaits counts the turns of the run that waited for their
	// session's tape until the watermark timeout (dev.bub.tape.stale.v1
	// events): each read a tape missing its session's last run. -1 when
	// the events stream could not be read.
	StaleWaits int
	// Recover runs from the last fault action to when every reply and
	// tape entry was there.
	Recover, Elapsed time.Duration
	// completeAt is when every reply and tape entry was there.
	completeAt time.Time
}

func (r Result) String() string {
	return fmt.Sprintf("turns_sent=%d replies=%d duplicates=%d lost=%d error_replies=%d tape_expected=%d tape_found=%d tape_duplicates=%d interrupted_runs=%d held_events=%d dead_letters=%d stale_waits=%d chaos_actions=%d recover=%s elapsed=%s",
		r.Sent, r.Replied, r.Duplicates, r.Lost, r.Errors, r.TapeExpected, r.TapeFound, r.TapeDuplicates, r.Interrupted, r.Held, r.DeadLetters, r.StaleWaits, r.Actions,
		r.Recover.Round(10*time.Millisecond), r.Elapsed.Round(10*time.Millisecond))
}

// Clean says whether nothing was lost or duplicated, on the replies and
// on the tapes.
func (r Result) Clean() bool {
	return r.Lost == 0 && r.Duplicates == 0 && r.TapeDuplicates == 0 && r.TapeFound == r.TapeExpected
}

// replies counts the outbound envelopes per inbound id and says which
// inbound ids had an error reply.
func (g Target) replies(ctx context.Context) (per map[string]int, errored map[string]bool, err error) {
	names := subjects.Default()
	var st jetstream.Stream
	if err := jsretry.Read(ctx, func(ctx context.Context) (err error) {
		st, err = g.JS.Stream(ctx, names.OutboundStream())
		return err
	}); err != nil {
		return nil, nil, err
	}
	per, errored = map[string]int{}, map[string]bool{}
	for next := uint64(1); ; {
		// Each read is retried in short attempts: a request the stream
		// never answers (sent as its leader changed) would otherwise hold
		// the poll for the whole of ctx and show as recovery time.
		var raw *jetstream.RawStreamMsg
		err := jsretry.Read(ctx, func(ctx context.Context) (err error) {
			raw, err = st.GetMsg(ctx, next, jetstream.WithGetMsgSubject(names.OutboundAll()))
			return err
		})
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				return per, errored, nil
			}
			return nil, nil, err
		}
		next = raw.Sequence + 1
		ev, err := events.Decode(raw.Header, raw.Data)
		if err != nil {
			return nil, nil, fmt.Errorf("outbound %d: %w", raw.Sequence, err)
		}
		var env envelope.Envelope
		if err := events.DecodeData(ev, &env); err != nil {
			return nil, nil, err
		}
		per[env.InReplyTo]++
		if env.Kind == envelope.KindError {
			errored[env.InReplyTo] = true
		}
	}
}

// tapes counts, per turn id, the user messages on the tapes that carry
// the turn's content, and the interrupted runs.
func (g Target) tapes(ctx context.Context, l Load) (per map[string]int, interrupted int, err error) {
	var store *tape.JetStreamStore
	if err := jsretry.Read(ctx, func(ctx context.Context) (err error) {
		store, err = tape.NewJetStreamStore(ctx, g.JS, subjects.Default(), tape.WithoutProvisioning())
		return err
	}); err != nil {
		return nil, 0, err
	}
	per = map[string]int{}
	for s := range l.Sessions {
		entries, err := store.Fetch(ctx, g.session(s, l), tape.All())
		if err != nil {
			return nil, 0, err
		}
		for _, e := range entries {
			if e.Kind == tape.KindEvent && e.Payload["name"] == "run.interrupted" {
				interrupted++
			}
			if e.Kind != tape.KindMessage || e.Payload["role"] != "user" {
				continue
			}
			text := fmt.Sprint(e.Payload["content"])
			if i := strings.Index(text, marker); i >= 0 {
				id, _, _ := strings.Cut(text[i+len(marker):], ".")
				per[id]++
			}
		}
	}
	return per, interrupted, nil
}

// recorderBacklog returns how many lifecycle events the recorder has not
// taken yet and how many it holds unacknowledged (-1, -1 when unknown).
func (g Target) recorderBacklog(ctx context.Context) (pending, held int) {
	names := subjects.Default()
	var info *jetstream.ConsumerInfo
	if err := jsretry.Read(ctx, func(ctx context.Context) error {
		cons, err := g.JS.Consumer(ctx, names.EventsStream(), names.RecorderConsumer())
		if err == nil {
			info, err = cons.Info(ctx)
		}
		return err
	}); err != nil {
		return -1, -1
	}
	return int(info.NumPending), info.NumAckPending
}

// heldGrace is how long a settled scenario waits for the recorder to let
// go of the events it still holds: those of a run whose run.started was
// lost in a NATS outage stay held until the recorder's idle-run timeout
// records the run as interrupted (reported as held_events).
const heldGrace = 20 * time.Second

// settle waits until every turn has its reply and its tape entries and
// the recorder took every event (or the deadline passes), then measures
// the result.
func (g Target) settle(t *testing.T, turns []Turn, l Load, within time.Duration) Result {
	r := Result{Sent: len(turns), TapeExpected: len(turns)}
	deadline := time.Now().Add(within)
	var complete time.Time // when replies and tapes were first complete
	poll := time.NewTicker(500 * time.Millisecond)
	defer poll.Stop()
	for ; ; <-poll.C {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		per, errored, rerr := g.replies(ctx)
		var tapes map[string]int
		var interrupted int
		var terr error
		pending, held := -1, -1
		if rerr == nil {
			tapes, interrupted, terr = g.tapes(ctx, l)
			pending, held = g.recorderBacklog(ctx)
		}
		cancel()
		if rerr == nil && terr == nil {
			r.Replied, r.Duplicates, r.Lost, r.Errors = 0, 0, 0, 0
			r.TapeFound, r.TapeDuplicates, r.Interrupted = 0, 0, interrupted
			for _, tr := range turns {
				switch n := per[tr.ID]; {
				case n == 0:
					r.Lost++
				default:
					r.Replied++
					r.Duplicates += n - 1
				}
				if errored[tr.ID] {
					r.Errors++
				}
				if n := tapes[tr.ID]; n > 0 {
					r.TapeFound++
					r.TapeDuplicates += n - 1
				}
			}
			r.Held = held
			if r.Lost == 0 && r.TapeFound == r.TapeExpected && pending == 0 {
				if complete.IsZero() {
					complete = time.Now()
				}
				if held == 0 || time.Since(complete) > heldGrace {
					r.completeAt = complete
					return r
				}
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: not settled within %v (replies err %v, tapes err %v, recorder backlog %d, held %d)", g.Name, within, rerr, terr, pending, held)
			g.explainRecorder(t)
			return r
		}
	}
}

// Pace tells fault actions how far the load is and records when the
// latest action happened.
type Pace struct {
	start time.Time
	span  time.Duration // planned duration of the load
	last  atomic.Int64  // unix nanos of the latest action
}

// Progress is the fraction of the planned load duration that passed.
func (p *Pace) Progress() float64 { return float64(time.Since(p.start)) / float64(p.span) }

// Mark records a fault action now.
func (p *Pace) Mark() { p.last.Store(time.Now().UnixNano()) }

// WaitFor waits until the load is at least at fraction, false when ctx
// ends first.
func (p *Pace) WaitFor(ctx context.Context, fraction float64) bool {
	for p.Progress() < fraction {
		if !Sleep(ctx, 50*time.Millisecond) {
			return false
		}
	}
	return ctx.Err() == nil
}

// Run runs the load on g while fault runs (until the load is sent, when
// its context ends), then settles, prints the summary line (prefix[name]
// result) and fails the test unless nothing was lost or duplicated.
// fault returns how many actions it took. The result is returned for
// further checks.
func Run(t *testing.T, prefix string, g Target, l Load, fault func(ctx context.Context, p *Pace) int) Result {
	t.Helper()
	p := &Pace{start: time.Now(), span: time.Duration(float64(l.Turns) / l.Rate * float64(time.Second))}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var actions int
	staleBefore := g.staleWaits()
	done := make(chan struct{})
	go func() {
		defer close(done)
		actions = fault(ctx, p)
	}()
	turns := g.send(t, l)
	cancel()
	<-done
	last := time.Now()
	if n := p.last.Load(); n != 0 {
		last = time.Unix(0, n)
	}
	r := g.settle(t, turns, l, 4*time.Minute)
	r.Actions = actions
	r.Elapsed = time.Since(p.start)
	r.DeadLetters = g.DeadLetters()
	r.StaleWaits = -1
	if after := g.staleWaits(); staleBefore >= 0 && after >= 0 {
		r.StaleWaits = after - staleBefore
	}
	r.Recover = time.Since(last)
	if !r.completeAt.IsZero() {
		r.Recover = r.completeAt.Sub(last)
	}
	line := fmt.Sprintf("%s[%s] %s", prefix, g.Name, r)
	fmt.Println(line)
	t.Log(line)
	if !r.Clean() {
		t.Errorf("%s: lost %d, duplicate replies %d, duplicate tape entries %d, tape %d/%d", g.Name, r.Lost, r.Duplicates, r.TapeDuplicates, r.TapeFound, r.TapeExpected)
	}
	return r
}

// Every runs action at random intervals in [lo, hi) until ctx ends and
// returns how often it ran.
func Every(ctx context.Context, p *Pace, lo, hi time.Duration, action func()) int {
	n := 0
	for Sleep(ctx, lo+rand.N(hi-lo)) {
		p.Mark()
		action()
		n++
	}
	return n
}

// Sleep pauses between fault actions; false when ctx ended.
func Sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// DeadLetters counts the messages in the dead-letter stream (-1 when
// unknown).
func (g Target) DeadLetters() int {
	names := subjects.Default()
	return g.stored(names.DLQStream(), names.DLQAll())
}

// staleWaits counts the tape-stale events stored on the events stream
// (-1 when unknown).
func (g Target) staleWaits() int {
	names := subjects.Default()
	return g.stored(names.EventsStream(), names.EventsOfType(events.SubjectName(events.TypeTapeStale)))
}

// stored counts the messages of stream on subjects matching filter (-1
// when unknown).
func (g Target) stored(stream, filter string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n := -1
	_ = jsretry.Read(ctx, func(ctx context.Context) error {
		st, err := g.JS.Stream(ctx, stream)
		if err != nil {
			return err
		}
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
		if err != nil {
			return err
		}
		n = 0
		for _, c := range info.State.Subjects {
			n += int(c)
		}
		return nil
	})
	return n
}

// explainRecorder logs what the recorder still holds (a failed run's
// diagnosis).
func (g Target) explainRecorder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	names := subjects.Default()
	cons, err := g.JS.Consumer(ctx, names.EventsStream(), names.RecorderConsumer())
	if err != nil {
		t.Logf("recorder consumer: %v", err)
		return
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Logf("recorder consumer: %v", err)
		return
	}
	t.Logf("recorder consumer: pending %d, ack pending %d, redelivered %d, delivered %d, ack floor %d",
		info.NumPending, info.NumAckPending, info.NumRedelivered, info.Delivered.Stream, info.AckFloor.Stream)
	st, err := g.JS.Stream(ctx, names.EventsStream())
	if err != nil {
		return
	}
	shown := 0
	for seq := info.AckFloor.Stream + 1; seq <= info.Delivered.Stream && shown < 40; seq++ {
		raw, err := st.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		ev, err := events.Decode(raw.Header, raw.Data)
		if err != nil {
			continue
		}
		t.Logf("  event %d %s run %s seq %d session %s", seq, ev.Type(), events.RunID(ev), events.Seq(ev), events.SessionID(ev))
		shown++
	}
}
