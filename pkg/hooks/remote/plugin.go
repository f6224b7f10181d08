package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/internal/bufpool"
	"github.com/bubbus/bub/pkg/subjects"
)

// discoveryWindow is how long discovery keeps collecting info replies of
// further instances after the first one arrived.
const discoveryWindow = 50 * time.Millisecond

// Plugin is the client side of one interceptor service: a [hooks.Plugin]
// whose hook methods forward to bub.hook.<service>.<hook> over NATS
// request/reply. Register it like any plugin, after [Plugin.Start] when
// its hooks are discovered (see [Plugin.ServesHook]). It is safe for
// concurrent use.
type Plugin struct {
	nc    *nats.Conn
	cfg   Config
	log   *slog.Logger
	trace func(context.Context) (traceparent, tracestate string)
	// span, when set, starts the client span of one request.
	span func(ctx context.Context, subject string) (context.Context, func(error))
	// subject holds bub.hook.<service>.<hook> per hook in Hooks().
	subject map[hooks.Hook]string
	group   string // the subject prefix of its endpoints
	stats   counters

	// mu guards the fields below.
	mu sync.Mutex
	// started is set by Start; served and instances are its findings.
	started   bool
	served    []hooks.Hook
	instances int
	// asked records a ServesHook call before Start discovered the hooks.
	asked bool
}

// Option configures a [Plugin].
type Option func(*Plugin) error

// WithTraceContext sets f, which returns the W3C trace context of a
// call's ctx; it travels in the traceparent and tracestate headers. Without
// it requests carry no trace context.
func WithTraceContext(f func(ctx context.Context) (traceparent, tracestate string)) Option {
	return func(p *Plugin) error {
		if f == nil {
			return errors.New("remote: nil trace context function")
		}
		p.trace = f
		return nil
	}
}

// WithCallSpan sets start, which begins the client span of each request
// to subject and returns the context the request carries (its trace
// context goes into the headers) and a function ending the span with the
// call's error.
func WithCallSpan(start func(ctx context.Context, subject string) (context.Context, func(error))) Option {
	return func(p *Plugin) error {
		if start == nil {
			return errors.New("remote: nil call span function")
		}
		p.span = start
		return nil
	}
}

// New returns the client plugin of the interceptor service cfg names,
// talking over nc. log receives what the plugin handles itself (skipped
// and fail-closed calls, discovery); nil discards. New does no I/O; Start
// discovers the service.
func New(nc *nats.Conn, names subjects.Names, cfg Config, log *slog.Logger, opts ...Option) (*Plugin, error) {
	if nc == nil {
		return nil, errors.New("remote: nil NATS connection")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("remote interceptor %q: %w", cfg.Service, err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Plugin{
		nc:      nc,
		cfg:     cfg.withDefaults(),
		log:     log.With("interceptor", cfg.Service),
		subject: make(map[hooks.Hook]string, len(served)),
		group:   names.HookService(cfg.Service),
	}
	for _, h := range served {
		p.subject[h] = names.Hook(cfg.Service, string(h))
	}
	for _, o := range opts {
		if err := o(p); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Name returns the service name.
func (p *Plugin) Name() string { return p.cfg.Service }

// Start discovers the service through its NATS micro INFO endpoint: how
// many instances answer and which hooks they serve (the union of their
// endpoints). Calling it again does nothing.
//
// With [Config.Hooks] set, discovery only counts instances and nothing is
// required to be running. Otherwise the discovered hooks are the ones the
// plugin serves; when no instance answers, a fail-open plugin serves no
// hook (logged) and a fail-closed one fails to start, because it could not
// enforce anything.
//
// The registry asks which hooks a plugin serves when the plugin is
// registered, so without Config.Hooks call Start before registering; Start
// fails when it was asked earlier.
func (p *Plugin) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		return nil
	}
	found, instances, err := p.discover(ctx)
	explicit := len(p.cfg.Hooks) > 0
	switch {
	case explicit:
		if err != nil {
			p.log.Info("interceptor.discovery_failed", "err", err, "hooks", p.cfg.Hooks)
		}
	case p.asked:
		return fmt.Errorf("interceptor %q was registered before it was started: start it first or configure its hooks", p.cfg.Service)
	case err == nil && instances > 0 && len(found) == 0 && p.cfg.Failure == FailClosed:
		// The instances that answered serve none of its hooks under this
		// process's subjects (another prefix, or another service of the
		// name): it could enforce nothing.
		return fmt.Errorf("interceptor %q fails closed but its %d instance(s) serve no hook under %s: check BUB_PREFIX on both sides, or list its hooks in %s", p.cfg.Service, instances, p.group+".*", EnvHooks(p.cfg.Service))
	case err == nil && instances > 0 && len(found) == 0:
		p.log.Warn("interceptor.serves_nothing", "instances", instances, "detail", "the instances that answered serve no hook under "+p.group+".*", "hint", EnvHooks(p.cfg.Service))
	case err == nil && instances > 0:
	case p.cfg.Failure == FailClosed:
		return errors.Join(fmt.Errorf("interceptor %q fails closed but no instance answered discovery: start the service first, or list its hooks in %s so calls are denied until it runs", p.cfg.Service, EnvHooks(p.cfg.Service)), err)
	default:
		p.log.Warn("interceptor.not_found", "err", err, "detail", "no instance answered discovery; the interceptor serves no hook until this process restarts", "hint", EnvHooks(p.cfg.Service))
	}
	p.started, p.instances = true, instances
	if explicit {
		p.served = slices.Clone(p.cfg.Hooks)
	} else {
		p.served = found
	}
	p.log.Debug("interceptor.started", "instances", instances, "hooks", p.served)
	return nil
}

// discover asks every instance of the service for its info ([Discover])
// and returns how many answered and the union of the hooks they serve.
func (p *Plugin) discover(ctx context.Context) (found []hooks.Hook, instances int, err error) {
	replies, err := Discover(ctx, p.nc, micro.InfoVerb, p.cfg.Service, p.cfg.Timeout, discoveryWindow)
	if err != nil {
		return nil, 0, err
	}
	seen := map[hooks.Hook]bool{}
	for _, raw := range replies {
		var info micro.Info
		if err := json.Unmarshal(raw, &info); err != nil || info.Name != p.cfg.Service {
			continue
		}
		instances++
		for _, ep := range info.Endpoints {
			for _, h := range served {
				if ep.Subject == p.subject[h] && !seen[h] {
					seen[h] = true
					found = append(found, h)
				}
			}
		}
	}
	return found, instances, nil
}

// ServesHook reports whether the service serves h: one of [Config.Hooks]
// when set, else one of the hooks Start discovered (none before Start).
func (p *Plugin) ServesHook(h hooks.Hook) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.cfg.Hooks) > 0 {
		return slices.Contains(p.cfg.Hooks, h)
	}
	if !p.started {
		p.asked = true
	}
	return slices.Contains(p.served, h)
}

// Describe marks the plugin as remote for `bub hooks`, with the instances
// found at start, the timeout and the failure policy.
func (p *Plugin) Describe() hooks.Description {
	p.mu.Lock()
	defer p.mu.Unlock()
	var inst string
	switch {
	case !p.started:
		inst = "not started"
	case p.instances == 1:
		inst = "1 instance"
	default:
		inst = fmt.Sprintf("%d instances", p.instances)
	}
	return hooks.Description{
		Remote:  true,
		Service: p.cfg.Service,
		Detail:  fmt.Sprintf("%s, timeout %s, fail-%s", inst, p.cfg.Timeout, p.cfg.Failure),
	}
}

// Stats are the call counts of one interceptor service by outcome.
type Stats struct {
	Service      string
	OK           uint64
	NoResponders uint64
	Timeout      uint64
	Malformed    uint64
	RemoteError  uint64
	Transport    uint64
	Cancelled    uint64
}

// ByOutcome returns the counts keyed by outcome, one entry per [Outcome].
func (s Stats) ByOutcome() map[Outcome]uint64 {
	return map[Outcome]uint64{
		OutcomeOK: s.OK, OutcomeNoResponders: s.NoResponders, OutcomeTimeout: s.Timeout,
		OutcomeMalformed: s.Malformed, OutcomeRemoteError: s.RemoteError,
		OutcomeTransport: s.Transport, OutcomeCancelled: s.Cancelled,
	}
}

// counters are the live counts behind [Stats].
type counters struct {
	ok, noResponders, timeout, malformed, remoteError, transport, cancelled atomic.Uint64
}

func (c *counters) add(o Outcome) {
	switch o {
	case OutcomeOK:
		c.ok.Add(1)
	case OutcomeNoResponders:
		c.noResponders.Add(1)
	case OutcomeTimeout:
		c.timeout.Add(1)
	case OutcomeMalformed:
		c.malformed.Add(1)
	case OutcomeRemoteError:
		c.remoteError.Add(1)
	case OutcomeTransport:
		c.transport.Add(1)
	case OutcomeCancelled:
		c.cancelled.Add(1)
	}
}

// Stats returns the call counts so far.
func (p *Plugin) Stats() Stats {
	c := &p.stats
	return Stats{
		Service:      p.cfg.Service,
		OK:           c.ok.Load(),
		NoResponders: c.noResponders.Load(),
		Timeout:      c.timeout.Load(),
		Malformed:    c.malformed.Load(),
		RemoteError:  c.remoteError.Load(),
		Transport:    c.transport.Load(),
		Cancelled:    c.cancelled.Load(),
	}
}

// call is one interceptor call: the request's routing fields and state.
type call struct {
	hook      hooks.Hook
	runID     string
	sessionID string
	state     *bub.State
}

// roundTrip sends in to the service's endpoint of c.hook, decodes the
// reply with conv and counts the outcome. Every failure is a *CallError.
func roundTrip[In, Out any](ctx context.Context, p *Plugin, c call, in In, conv func(*Reply) (Out, error)) (out Out, err error) {
	if p.span != nil {
		var end func(error)
		ctx, end = p.span(ctx, p.subject[c.hook])
		defer func() { end(err) }()
	}
	var zero Out
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	buf := bufpool.Get() // NATS copies the data when it publishes: reused once the request returned
	defer bufpool.Put(buf)
	msg, err := request(ctx, p, c, in, *buf)
	if err != nil {
		return zero, p.failed(c.hook, OutcomeTransport, fmt.Errorf("encoding the request: %w", err))
	}
	*buf = msg.Data
	resp, err := p.nc.RequestMsgWithContext(ctx, msg)
	switch {
	case err == nil:
	case errors.Is(err, nats.ErrNoResponders):
		return zero, p.failed(c.hook, OutcomeNoResponders, err)
	case parent.Err() != nil:
		return zero, p.failed(c.hook, OutcomeCancelled, parent.Err())
	case errors.Is(err, context.DeadlineExceeded):
		return zero, p.failed(c.hook, OutcomeTimeout, fmt.Errorf("no reply within %s: %w", p.cfg.Timeout, err))
	case errors.Is(err, nats.ErrMaxPayload):
		return zero, p.failed(c.hook, OutcomeTransport, fmt.Errorf("its request of %d bytes is larger than the NATS server takes (max_payload %d): %w", len(msg.Data), p.nc.MaxPayload(), err))
	default:
		return zero, p.failed(c.hook, OutcomeTransport, err)
	}
	rep, remoteErr, err := decodeReply(c.hook, resp.Header, resp.Data)
	if remoteErr != nil {
		return zero, p.failed(c.hook, OutcomeRemoteError, remoteErr)
	}
	if err != nil {
		return zero, p.failed(c.hook, OutcomeMalformed, err)
	}
	if out, err = conv(&rep); err != nil {
		return zero, p.failed(c.hook, OutcomeMalformed, err)
	}
	p.stats.add(OutcomeOK)
	return out, nil
}

// request builds the request message of a call in buf; ctx carries its
// deadline and trace context.
func request[In any](ctx context.Context, p *Plugin, c call, in In, buf []byte) (*nats.Msg, error) {
	r := Request[In]{Hook: c.hook, RunID: c.runID, SessionID: c.sessionID, Input: in}
	if c.state != nil {
		r.State = c.state.Public()
	}
	if r.SessionID == "" {
		r.SessionID, _ = r.State[bub.StateSessionID].(string)
	}
	data, err := encodeRequest(buf, &r)
	if err != nil {
		return nil, err
	}
	hdr := nats.Header{}
	if deadline, ok := ctx.Deadline(); ok {
		hdr[subjects.HeaderDeadline] = []string{deadline.UTC().Format(time.RFC3339Nano)}
	}
	if p.trace != nil {
		if tp, ts := p.trace(ctx); tp != "" {
			hdr[subjects.HeaderTraceparent] = []string{tp}
			if ts != "" {
				hdr[subjects.HeaderTracestate] = []string{ts}
			}
		}
	}
	return &nats.Msg{Subject: p.subject[c.hook], Header: hdr, Data: data}, nil
}

// failed counts a failed call and returns its *CallError.
func (p *Plugin) failed(h hooks.Hook, o Outcome, err error) error {
	p.stats.add(o)
	return &CallError{Service: p.cfg.Service, Hook: h, Outcome: o, Err: err}
}

// failsClosed reports whether err, a failed call's error, triggers the
// fail-closed policy (cancellation never does).
func (p *Plugin) failsClosed(err error) bool {
	return p.cfg.Failure == FailClosed && outcomeOf(err) != OutcomeCancelled
}

// denial is the message of a tool call denied because the interceptor
// failed and fails closed.
func (p *Plugin) denial(err error) string {
	return fmt.Sprintf("Tool call denied: interceptor %q %s, and it fails closed.", p.cfg.Service, p.failure(err))
}

// abort is the error of an LLM call aborted because the interceptor
// failed and fails closed: Bub's error, whose kind says whether trying
// again may help (the registry names the hook in front of it).
func (p *Plugin) abort(err error) *bub.Error {
	kind := bub.KindTemporary // not running, not answering: it may be later
	switch outcomeOf(err) {
	case OutcomeMalformed:
		kind = bub.KindConfig // an interceptor that does not speak the protocol
	case OutcomeRemoteError:
		kind = bub.AsError(errors.Unwrap(err)).Kind
	}
	return bub.Errorf(kind, "interceptor %q %s, and it fails closed; the call was aborted.", p.cfg.Service, p.failure(err))
}

// failure says why a failed call got no answer, for the user.
func (p *Plugin) failure(err error) string {
	switch outcomeOf(err) {
	case OutcomeNoResponders:
		return "has no running instance"
	case OutcomeTimeout:
		return "did not answer within " + p.cfg.Timeout.String()
	case OutcomeMalformed:
		return "sent a malformed reply"
	case OutcomeRemoteError:
		return strings.TrimSpace("failed: " + bub.AsError(errors.Unwrap(err)).Message)
	default:
		if errors.Is(err, nats.ErrMaxPayload) {
			return "could not be called: " + errors.Unwrap(err).Error()
		}
		return "could not be reached"
	}
}

// ordinary applies the failure policy to a failed call of a hook that
// propagates errors (everything but the agent-loop hooks and on_error):
// fail-open skips an interceptor that could not answer (logged once,
// here), and an error the interceptor returned propagates like a local
// plugin's would.
func (p *Plugin) ordinary(ctx context.Context, err error) error {
	if err == nil || p.cfg.Failure == FailClosed {
		return err
	}
	switch o := outcomeOf(err); o {
	case OutcomeRemoteError, OutcomeCancelled:
		return err
	default:
		p.log.LogAttrs(ctx, slog.LevelWarn, "interceptor.skipped", slog.String("outcome", string(o)), slog.Any("err", err))
		return nil
	}
}
