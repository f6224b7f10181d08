package interceptor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/hooks/remote"
	"github.com/bubbus/bub/pkg/subjects"
)

// DefaultVersion is the NATS micro version of a service without
// [WithVersion].
const DefaultVersion = "1.0.0"

// MetadataPlugin is the NATS micro service metadata key holding the name
// of the plugin a service serves.
const MetadataPlugin = "dev.bub.plugin"

// Option configures [Serve].
type Option func(*options) error

type options struct {
	name        string
	version     string
	description string
	trace       func(ctx context.Context, traceparent, tracestate string) context.Context
	log         *slog.Logger
	concurrency int
}

// WithName sets the service name (default: the plugin's name). It must be a
// NATS micro name: letters, digits, '-' and '_'.
func WithName(name string) Option {
	return func(o *options) error {
		o.name = name
		return nil
	}
}

// WithVersion sets the service's semantic version (default
// [DefaultVersion]), shown by NATS micro discovery.
func WithVersion(v string) Option {
	return func(o *options) error {
		o.version = v
		return nil
	}
}

// WithDescription sets the service description shown by NATS micro
// discovery.
func WithDescription(d string) Option {
	return func(o *options) error {
		o.description = d
		return nil
	}
}

// WithTraceContext sets f, which returns ctx carrying the W3C trace
// context of a request's traceparent and tracestate headers (empty when
// absent). Without it the trace headers are ignored.
func WithTraceContext(f func(ctx context.Context, traceparent, tracestate string) context.Context) Option {
	return func(o *options) error {
		if f == nil {
			return errors.New("interceptor: nil trace context function")
		}
		o.trace = f
		return nil
	}
}

// WithLogger sets the logger for recovered panics (with their stack) and
// replies that could not be sent; nil discards.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		o.log = l
		return nil
	}
}

// WithConcurrency serves the plugin as n instances of the service on the
// connection (default 1), so that up to n requests of each hook run at
// once in this process: each instance is a NATS micro service of its own
// (its own id, stats and ping in `nats micro ls`) whose endpoints handle
// their requests one at a time, and the instances share the load through
// the queue group as separate processes do. For plugins that wait on I/O,
// such as an audit service writing every call to a database; the plugin
// must then be safe for concurrent use.
func WithConcurrency(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("interceptor: concurrency %d, want at least 1", n)
		}
		o.concurrency = n
		return nil
	}
}

// Service is an in-process plugin served as an interceptor service.
type Service struct {
	name   string
	hooks  []hooks.Hook
	plugin hooks.Plugin
	closer hooks.Closer    // the plugin's, nil when it has none
	micro  []micro.Service // the instances WithConcurrency asks for
	nc     *nats.Conn
	trace  func(ctx context.Context, traceparent, tracestate string) context.Context
	log    *slog.Logger

	// mu is held shared by every running handler and exclusively by Stop
	// while it closes the plugin, so the plugin is never closed under a
	// handler.
	mu     sync.RWMutex
	closed bool
}

// Serve serves plugin as the interceptor service of its name (see
// [WithName]) on nc: one NATS micro endpoint per hook the plugin implements
// and an interceptor can serve ([remote.Hooks]), with subjects
// bub.hook.<service>.<hook> and the service name as queue group, so
// several instances share the load. A plugin that implements
// [hooks.Starter] is started first, with ctx. Serve returns once the NATS
// server knows the endpoints; ctx bounds the start and that wait and is not
// kept.
//
// Each request runs with a fresh context whose deadline is the caller's
// (the Bub-Deadline header); when the deadline passes while the plugin
// runs, no reply is sent, as the caller stopped waiting and counts a
// timeout. A handler's error or panic becomes an error reply that keeps a
// *bub.Error's kind and message. Each endpoint handles its requests one at
// a time; [WithConcurrency] or more processes give more throughput.
func Serve(ctx context.Context, nc *nats.Conn, names subjects.Names, plugin hooks.Plugin, opts ...Option) (*Service, error) {
	if nc == nil || plugin == nil {
		return nil, errors.New("interceptor: nil connection or plugin")
	}
	o := options{name: plugin.Name(), version: DefaultVersion, concurrency: 1}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	if err := remote.ValidateService(o.name); err != nil {
		return nil, err
	}
	if o.description == "" {
		o.description = "Bub interceptor serving plugin " + plugin.Name()
	}
	served := slices.DeleteFunc(hooks.HooksOf[struct{}, struct{}](plugin), func(h hooks.Hook) bool { return !remote.Serves(h) })
	if len(served) == 0 {
		return nil, fmt.Errorf("interceptor: plugin %q implements no hook an interceptor can serve", plugin.Name())
	}
	s := &Service{name: o.name, hooks: served, plugin: plugin, trace: o.trace, log: o.log.With("interceptor", o.name)}
	if st, ok := hooks.As[hooks.Starter](plugin); ok {
		if err := st.Start(ctx); err != nil {
			return nil, fmt.Errorf("interceptor %q: starting plugin: %w", o.name, err)
		}
	}
	s.closer, _ = hooks.As[hooks.Closer](plugin)
	if err := s.add(nc, names, o); err != nil {
		return nil, errors.Join(err, s.Stop(ctx))
	}
	// Once the server has the subscriptions, clients on other connections
	// can discover and call the service.
	if err := flush(ctx, nc); err != nil {
		return nil, errors.Join(fmt.Errorf("interceptor %q: flushing subscriptions: %w", o.name, err), s.Stop(ctx))
	}
	return s, nil
}

// add creates the micro service instances and their endpoints.
func (s *Service) add(nc *nats.Conn, names subjects.Names, o options) error {
	s.nc = nc
	for range o.concurrency {
		svc, err := micro.AddService(nc, micro.Config{
			Name:        s.name,
			Version:     o.version,
			Description: o.description,
			Metadata:    map[string]string{MetadataPlugin: s.plugin.Name()},
			QueueGroup:  s.name,
		})
		if err != nil {
			return fmt.Errorf("interceptor %q: %w", s.name, err)
		}
		s.micro = append(s.micro, svc)
		g := svc.AddGroup(names.HookService(s.name), micro.WithGroupQueueGroup(s.name))
		for _, h := range s.hooks {
			if err := g.AddEndpoint(string(h), s.handler(h), micro.WithEndpointMetadata(map[string]string{"hook": string(h)})); err != nil {
				return fmt.Errorf("interceptor %q: endpoint %s: %w", s.name, h, err)
			}
		}
	}
	return nil
}

// flushTimeout bounds the wait for the server when ctx has no deadline.
const flushTimeout = 10 * time.Second

// flush waits until the server has processed everything nc sent.
func flush(ctx context.Context, nc *nats.Conn) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, flushTimeout)
		defer cancel()
	}
	return nc.FlushWithContext(ctx)
}

// Name returns the service name.
func (s *Service) Name() string { return s.name }

// Hooks returns the hooks the service serves, in [hooks.Specs] order.
func (s *Service) Hooks() []hooks.Hook { return slices.Clone(s.hooks) }

// Stop stops the service: its endpoints drain (requests already delivered
// are still answered) and the plugin, if it implements [hooks.Closer], is
// closed with ctx once no handler runs; a request that arrives after that
// is answered with a temporary error. Stopping again does nothing.
func (s *Service) Stop(ctx context.Context) error {
	var err error
	for _, svc := range s.micro {
		err = errors.Join(err, svc.Stop())
	}
	if len(s.micro) > 0 {
		// Stop removes the endpoints' interest; the round trip (bounded,
		// also when ctx is done) makes sure the server has, so no request
		// reaches a stopped service.
		err = errors.Join(err, flush(context.WithoutCancel(ctx), s.nc))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.closer == nil {
		return err
	}
	s.closed = true
	return errors.Join(err, s.closer.Close(ctx))
}

// endpoint adapts one hook: serve calls the plugin with a decoded request.
func endpoint[In any](s *Service, h hooks.Hook, serve func(context.Context, *remote.Request[In]) (remote.Reply, error)) micro.Handler {
	return micro.HandlerFunc(func(req micro.Request) {
		s.mu.RLock()
		defer s.mu.RUnlock()
		if s.closed {
			s.fail(req, h, bub.Errorf(bub.KindTemporary, "interceptor %q is stopping", s.name))
			return
		}
		var in remote.Request[In]
		if err := in.UnmarshalJSON(req.Data()); err != nil {
			s.fail(req, h, bub.Errorf(bub.KindInvalidInput, "decoding the %s request: %v", h, err))
			return
		}
		if in.Hook != "" && in.Hook != h {
			s.fail(req, h, bub.Errorf(bub.KindInvalidInput, "request for hook %q sent to the %s endpoint", in.Hook, h))
			return
		}
		ctx, cancel, err := s.requestContext(req.Headers())
		if err != nil {
			s.fail(req, h, err)
			return
		}
		defer cancel()
		ctx, obs := s.observe(ctx, req.Subject(), h, in.RunID)
		rep, err := guard(ctx, &in, serve)
		obs.end(ctx, err)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return // the caller gave up at this deadline: nobody waits for a reply
		}
		if err != nil {
			if pe, ok := errors.AsType[*hooks.PanicError](err); ok {
				s.log.Error("interceptor.panic", "hook", h, "panic", pe.Value, "stack", string(pe.Stack))
			}
			s.fail(req, h, err)
			return
		}
		s.reply(req, h, &rep)
	})
}

// requestContext returns the context of one request: the caller's deadline
// and trace context.
func (s *Service) requestContext(hdr micro.Headers) (context.Context, context.CancelFunc, error) {
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if v := hdr.Get(subjects.HeaderDeadline); v != "" {
		deadline, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return nil, nil, bub.Errorf(bub.KindInvalidInput, "%s header %q: want an RFC 3339 time", subjects.HeaderDeadline, v)
		}
		ctx, cancel = context.WithDeadline(ctx, deadline)
	}
	if s.trace != nil {
		ctx = s.trace(ctx, hdr.Get(subjects.HeaderTraceparent), hdr.Get(subjects.HeaderTracestate))
	}
	return ctx, cancel, nil
}

// guard calls serve, turning a panic into a *hooks.PanicError.
func guard[In any](ctx context.Context, in *remote.Request[In], serve func(context.Context, *remote.Request[In]) (remote.Reply, error)) (rep remote.Reply, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &hooks.PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return serve(ctx, in)
}

// emptyReply is the no-opinion reply.
var emptyReply = []byte("{}")

// reply sends rep, {} when it carries nothing.
func (s *Service) reply(req micro.Request, h hooks.Hook, rep *remote.Reply) {
	data := emptyReply
	if !rep.IsEmpty() {
		var err error
		if data, err = json.Marshal(rep); err != nil {
			s.fail(req, h, fmt.Errorf("encoding the %s reply: %w", h, err))
			return
		}
	}
	if limit := s.nc.MaxPayload(); limit > 0 && int64(len(data)) > limit {
		// Answered with the reason at once, not left to the caller's
		// timeout (NATS micro's Respond would fail, its error not
		// wrapping nats.ErrMaxPayload).
		s.fail(req, h, bub.Errorf(bub.KindConfig, "the %s reply is %d bytes, more than the NATS server takes (max_payload %d)", h, len(data), limit))
		return
	}
	if err := req.Respond(data); err != nil {
		s.log.Warn("interceptor.reply_failed", "hook", h, "err", err)
	}
}

// fail answers with an error: NATS micro error headers (the code from the
// error's kind) and an {"error": {kind, message, details}} body.
func (s *Service) fail(req micro.Request, h hooks.Hook, err error) {
	body, merr := json.Marshal(remote.Reply{Error: remote.WireError(err)})
	if limit := s.nc.MaxPayload(); merr != nil || limit > 0 && int64(len(body)) > limit-errorHeadroom {
		// Details that do not encode, or an error larger than the server
		// takes: kind and message only, the message cut to fit, so the
		// caller gets an answer at once instead of its timeout.
		be := bub.AsError(err)
		msg := be.Message
		// A sixth: JSON writes a byte as up to six (\u003c).
		if fit := max(limit-errorHeadroom, 0) / 6; limit > 0 && int64(len(msg)) > fit {
			msg = strings.ToValidUTF8(msg[:fit], "") + "…"
		}
		body, _ = json.Marshal(remote.Reply{Error: &remote.ErrorBody{Kind: be.Kind, Message: msg}})
	}
	if rerr := req.Error(remote.ErrorCode(bub.AsError(err).Kind), headerText(err.Error()), body); rerr != nil {
		s.log.Warn("interceptor.reply_failed", "hook", h, "err", rerr)
	}
}

// errorHeadroom is what an error reply keeps of max_payload for its
// headers and the JSON around the message.
const errorHeadroom = 4 << 10

// headerText makes s fit a header value: one line, at most 1 KiB.
func headerText(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 1024 {
		s = strings.ToValidUTF8(s[:1024], "")
	}
	if s == "" {
		s = "error"
	}
	return s
}
