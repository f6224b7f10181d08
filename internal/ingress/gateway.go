package ingress

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/telemetry"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/jsretry"
	"github.com/bubbus/bub/pkg/subjects"
)

// Publisher publishes inbound envelopes: it is the one code path by which
// envelopes enter the system, for HTTP clients, the CLI and the channels
// of a gateway alike.
type Publisher struct {
	js     jetstream.JetStream
	names  subjects.Names
	source string
}

// NewPublisher returns a publisher whose events have CloudEvents source
// source.
func NewPublisher(js jetstream.JetStream, names subjects.Names, source string) *Publisher {
	return &Publisher{js: js, names: names, source: source}
}

// Gateway is a [Publisher] that also collects the outbound envelopes that
// answer what it published (for ?wait and the CLI).
//
// It follows them on the outbound stream ([jsretry.Follow]: new messages
// only), not with a core subscription: a core subscription misses what is
// published while its connection moves to another server (lame duck, a
// lost server) or while its server is cut off from the stream's leader,
// and the POST waiting for that reply would wait out its ?wait. Follow
// resumes after the last reply it handed over instead.
type Gateway struct {
	*Publisher
	nc   *nats.Conn // for the core requests and subscriptions of the HTTP server
	log  *slog.Logger
	stop func()

	mu      sync.Mutex
	waiters map[string]map[*waiter]struct{} // by inbound envelope id (a retry may wait beside the first POST)
}

type waiter struct {
	size int
	got  map[string]bool     // outbound ids taken (deduplicated)
	out  []envelope.Envelope // in arrival order
	done chan struct{}
}

// NewGateway starts collecting outbound envelopes (the outbound stream
// must exist) and returns a gateway. Close it to stop.
func NewGateway(nc *nats.Conn, js jetstream.JetStream, names subjects.Names, source string, log *slog.Logger) (*Gateway, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Gateway{Publisher: NewPublisher(js, names, source), nc: nc, log: log, waiters: map[string]map[*waiter]struct{}{}}
	// The replies are followed from after the stream's last message by
	// sequence (jsretry.Follow), not with DeliverNew: a consumer made
	// again before its first message would then skip the replies
	// published in the gap. A cluster losing the server of the consumer
	// holds every waiting POST until it is made again, so it is not the
	// library's ordered consumer (10s per attempt, see jsretry.Follow).
	var last uint64
	err := jsretry.Read(context.Background(), func(ctx context.Context) error { // bounded by jsretry.ReadBound
		st, err := js.Stream(ctx, names.OutboundStream())
		if err != nil {
			return err
		}
		last = st.CachedInfo().State.LastSeq
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading outbound: %w", err)
	}
	stop, err := jsretry.Follow(context.Background(), js, names.OutboundStream(), names.OutboundAll(), last+1,
		func(m jetstream.Msg, _ uint64) { g.onOutbound(m.Subject(), m.Headers(), m.Data()) },
		func(err error) { g.log.Warn("ingress.outbound_pull_error", "err", err) })
	if err != nil {
		return nil, fmt.Errorf("reading outbound: %w", err)
	}
	g.stop = stop
	return g, nil
}

// Close stops collecting outbound envelopes.
func (g *Gateway) Close() error {
	g.stop()
	return nil
}

// Receipt says what happened to a published envelope.
type Receipt struct {
	ID        string `json:"id"`
	SessionID string `json:"session_id"`
	// Duplicate is true when an envelope with this id was already accepted.
	Duplicate bool `json:"duplicate,omitempty"`
}

// Publish sends env to the inbound stream with Nats-Msg-Id = env.ID. The
// envelope must already be valid; a retry with the same id is accepted
// once. An envelope larger than the NATS server takes fails with an error
// that wraps nats.ErrMaxPayload and names both sizes.
func (p *Publisher) Publish(ctx context.Context, env *envelope.Envelope) (Receipt, error) {
	if err := env.Validate(); err != nil {
		return Receipt{}, err
	}
	sid := SessionHint(env)
	subject := p.names.Inbound(env.ChannelOrDefault())
	ctx, span := telemetry.StartPublish(ctx, subject, env.ID)
	defer span.End()
	tp, ts := telemetry.TraceContext(ctx)
	ev, err := events.New(events.TypeEnvelopeInbound, events.Attrs{
		ID:          env.ID,
		Source:      p.source,
		SessionID:   sid,
		Traceparent: tp,
		Tracestate:  ts,
	}, env)
	if err != nil {
		return Receipt{}, err
	}
	msg, err := events.ToMsg(subject, ev)
	if err != nil {
		return Receipt{}, err
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(PublishBudget)
	}
	var ack *jetstream.PubAck
	err = publishBackoff.Do(ctx, deadline, nil, func(ctx context.Context) error {
		actx, cancel := context.WithTimeout(ctx, publishAttempt)
		defer cancel()
		ack, err = p.js.PublishMsg(actx, msg)
		return err
	})
	if err != nil {
		telemetry.Fail(span, err)
		switch {
		case jsretry.Transient(err):
			err = fmt.Errorf("%w: %w", ErrUnavailable, err)
		case errors.Is(err, nats.ErrMaxPayload):
			err = fmt.Errorf("its CloudEvent is %d bytes and headers, the NATS server takes at most %d (max_payload): %w", len(msg.Data), p.js.Conn().MaxPayload(), err)
		}
		return Receipt{}, fmt.Errorf("publishing inbound envelope: %w", err)
	}
	return Receipt{ID: env.ID, SessionID: sid, Duplicate: ack.Duplicate}, nil
}

// PublishBudget bounds how long [Publisher.Publish] retries when its
// context has no deadline.
const PublishBudget = 10 * time.Second

// publishAttempt bounds one publish attempt, so that an acknowledgement
// lost with a stream leader is asked for again (the same Nats-Msg-Id
// makes the stream keep the message once). As [jsretry.ReadAttempt], it is
// what an attempt sent just before the election ends adds to the
// recovery.
const publishAttempt = jsretry.ReadAttempt

// publishBackoff spaces publish attempts while a stream elects a leader
// (seconds at R3).
var publishBackoff = jsretry.Backoff{First: 100 * time.Millisecond, Max: 500 * time.Millisecond}

// ErrUnavailable wraps a publish that met only transient JetStream errors
// (no responders, no response from the stream, a 503, timeouts: a leader
// election or no quorum) until its budget ended. The stream may have kept
// the message all the same; publishing it again with the same id is safe.
var ErrUnavailable = errors.New("jetstream unavailable")

// SessionHint is the session id ingress reports for an envelope before a
// worker resolves it: the envelope's session id when non-blank, else
// Bub's default "<channel>:<chat_id>".
func SessionHint(env *envelope.Envelope) string {
	if env.SessionID != "" {
		return env.SessionID
	}
	return env.DefaultSessionID()
}

// Expect registers interest in the replies to inbound id; call it before
// Publish so no reply can be missed. The returned function waits until
// every outbound envelope of the turn arrived or ctx ends, and releases the
// registration.
func (g *Gateway) Expect(id string) func(ctx context.Context) ([]envelope.Envelope, error) {
	w := &waiter{size: -1, got: map[string]bool{}, done: make(chan struct{})}
	g.mu.Lock()
	if g.waiters[id] == nil {
		g.waiters[id] = map[*waiter]struct{}{}
	}
	g.waiters[id][w] = struct{}{}
	g.mu.Unlock()
	return func(ctx context.Context) ([]envelope.Envelope, error) {
		defer func() {
			g.mu.Lock()
			delete(g.waiters[id], w)
			if len(g.waiters[id]) == 0 {
				delete(g.waiters, id)
			}
			g.mu.Unlock()
		}()
		select {
		case <-w.done:
		case <-ctx.Done():
			return g.partial(w), ctx.Err()
		}
		return g.partial(w), nil
	}
}

func (g *Gateway) partial(w *waiter) []envelope.Envelope {
	g.mu.Lock()
	defer g.mu.Unlock()
	// Each batch in its index order (replies of one batch may arrive out
	// of it), the batches in the order their first reply arrived (a batch
	// is told by its size: an error envelope after some replies of a
	// batch is a batch of one of its own).
	first := map[int]int{}
	for i, env := range w.out {
		if _, ok := first[env.BatchSize]; !ok {
			first[env.BatchSize] = i
		}
	}
	out := slices.Clone(w.out)
	slices.SortStableFunc(out, func(a, b envelope.Envelope) int {
		return cmp.Or(cmp.Compare(first[a.BatchSize], first[b.BatchSize]), cmp.Compare(a.BatchIndex, b.BatchIndex))
	})
	return out
}

// decodeOutbound returns the envelope an outbound CloudEvent carries.
func decodeOutbound(header nats.Header, data []byte) (envelope.Envelope, error) {
	var env envelope.Envelope
	ev, err := events.Decode(header, data)
	if err != nil {
		return env, err
	}
	if ev.Type() != events.TypeEnvelopeOutbound {
		return env, fmt.Errorf("event type %q is not %s", ev.Type(), events.TypeEnvelopeOutbound)
	}
	err = events.DecodeData(ev, &env)
	return env, err
}

func (g *Gateway) onOutbound(subject string, header nats.Header, data []byte) {
	env, err := decodeOutbound(header, data)
	if err != nil {
		g.log.Warn("ingress.outbound_undecodable", "subject", subject, "err", err)
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	taken := false
	for w := range g.waiters[env.InReplyTo] {
		taken = w.add(env) || taken
	}
	if taken {
		_, span := telemetry.StartReceive(context.Background(), header, subject, env.ID)
		span.End()
	}
}

// add takes env unless the waiter has it already, closes done once the
// batch is complete (under the gateway's lock) and reports whether it took
// env. Every reply is kept (a turn that fails after some replies of a
// batch answers with an error envelope of a batch of its own, whose index
// repeats one of theirs) and answered in the order partial gives.
func (w *waiter) add(env envelope.Envelope) bool {
	if w.got[env.ID] {
		return false
	}
	w.got[env.ID] = true
	w.out = append(w.out, env)
	w.size = max(env.BatchSize, 1)
	if len(w.got) >= w.size {
		select {
		case <-w.done:
		default:
			close(w.done)
		}
	}
	return true
}
