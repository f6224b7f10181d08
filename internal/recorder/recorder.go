package recorder

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/dlq"
	"github.com/bubbus/bub/pkg/jsretry"
	"github.com/bubbus/bub/pkg/subjects"
	"github.com/bubbus/bub/pkg/tape"
)

// Config configures a recorder. The zero value means the defaults.
type Config struct {
	// Lanes is the number of sessions committed in parallel (16). Events of
	// one session always go to the same lane, in order.
	Lanes int
	// IdleRun is how long a run may go without events before it is
	// recorded as interrupted (10m).
	IdleRun time.Duration
	// Sweep is the period of in-progress acks and idle checks (10s); it
	// must be shorter than the recorder consumer's ack wait.
	Sweep time.Duration
}

func (c Config) withDefaults() Config {
	if c.Lanes <= 0 {
		c.Lanes = 16
	}
	if c.IdleRun <= 0 {
		c.IdleRun = 10 * time.Minute
	}
	if c.Sweep <= 0 {
		c.Sweep = 10 * time.Second
	}
	return c
}

// Store is what the recorder writes: appends with commit ids and
// watermarks, and archives before a reset.
type Store interface {
	tape.Store
	tape.Archiver
}

// Recorder builds tapes from lifecycle events.
type Recorder struct {
	cfg   Config
	js    jetstream.JetStream
	names subjects.Names
	store Store
	dlq   *dlq.Writer
	state jetstream.KeyValue
	log   *slog.Logger
}

// New returns a recorder writing to store.
func New(cfg Config, js jetstream.JetStream, names subjects.Names, store Store, state jetstream.KeyValue, log *slog.Logger) *Recorder {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Recorder{cfg: cfg.withDefaults(), js: js, names: names, store: store, dlq: dlq.NewWriter(js, names, log), state: state, log: log}
}

// Run consumes lifecycle events until ctx ends. On shutdown it stops
// pulling; runs not yet committed stay unacknowledged and are redelivered
// drainGrace bounds how long the lanes keep recording after the stop:
// long enough for the commits of the fetched events (a tape append is
// milliseconds), short enough that a stop with the servers gone is not
// held up.
const drainGrace = 5 * time.Second

// to the next recorder.
func (r *Recorder) Run(ctx context.Context) error {
	cons, err := jsretry.Consumer(ctx, r.js, r.names.EventsStream(), r.names.RecorderConsumer())
	if err != nil {
		return fmt.Errorf("binding recorder consumer: %w", err)
	}
	it, err := cons.Messages(jsretry.PullOptions(2048)...)
	if err != nil {
		return fmt.Errorf("consuming events: %w", err)
	}
	// The lanes' work outlives the stop by up to drainGrace: the events
	// fetched before it are recorded, so a run that completed as the stop
	// came is on its tape when the recorder exits (not only after the next
	// start); what is still incomplete is handed back.
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	defer context.AfterFunc(ctx, func() { time.AfterFunc(drainGrace, cancelWork) })()
	lanes := make([]*lane, r.cfg.Lanes)
	var wg sync.WaitGroup
	for i := range lanes {
		lanes[i] = &lane{r: r, in: make(chan jetstream.Msg, 256), runs: map[string]*run{}}
		wg.Go(func() { lanes[i].loop(work) })
	}
	go func() {
		<-ctx.Done()
		it.Drain() // buffered events still come out of Next, then it ends
	}()
	r.log.Info("recorder.consuming", "stream", r.names.EventsStream(), "lanes", len(lanes))
	for {
		msg, err := it.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) || ctx.Err() != nil {
				break
			}
			r.log.Warn("recorder.pull_error", "err", err)
			continue
		}
		l := lanes[laneOf(msg.Subject(), len(lanes))]
		select {
		case l.in <- msg:
		case <-work.Done():
			_ = msg.Nak()
		}
	}
	for _, l := range lanes {
		close(l.in)
	}
	wg.Wait()
	return nil
}

// laneOf hashes the session token of an event subject
// (<prefix>.events.<session>.<event…>).
func laneOf(subject string, n int) int {
	tok := sessionToken(subject)
	h := fnv.New32a()
	_, _ = h.Write([]byte(tok))
	return int(h.Sum32() % uint32(n))
}

func sessionToken(subject string) string {
	dots := 0
	start := 0
	for i := 0; i < len(subject); i++ {
		if subject[i] != '.' {
			continue
		}
		dots++
		switch dots {
		case 2:
			start = i + 1
		case 3:
			return subject[start:i]
		}
	}
	return subject
}
