package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/dlq"
	"github.com/bubbus/bub/internal/ingress"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/pkg/channels"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/subjects"
)

// ErrNoChannels is returned when the enabled list selects no channel. Its
// text is Bub's, word for word (behaviour check 88), hence the capital.
var ErrNoChannels = errors.New("No channels are enabled. Configure at least one channel with 'bub onboard' or '--enable-channel'.")

// Provider returns the channels of provide_channels, whose messages go to
// handler (hooks.Registry.Startup().Channels).
type Provider = hooks.ChannelsFunc

// Options configures a gateway. Every field without a documented default
// is required.
type Options struct {
	// NC and JS are the gateway's connection (the max-deliveries advisory
	// watcher subscribes on NC).
	NC *nats.Conn
	JS jetstream.JetStream
	// Names are the deployment's NATS names.
	Names subjects.Names
	// Topology sizes the gateway consumers (GatewayAckWait,
	// GatewayMaxDeliver); the streams and the delivered bucket must exist
	// (natsx.EnsureTopology).
	Topology natsx.Topology
	// Source is the CloudEvents source of the inbound envelopes published
	// (events.Source("gateway", instance)).
	Source string
	// Enabled is the comma list of enabled channels (BUB_ENABLED_CHANNELS,
	// --enable-channel); see channels.Select. "" enables none.
	Enabled string
	// Channels provides the channels.
	Channels Provider
	// Buffer configures the debounce of channels that need it.
	Buffer channels.BufferConfig
	// Concurrency bounds the sends in flight per channel in this instance
	// (16); the outbound envelopes of one session are sent in order,
	// a failed one holding back the session's later ones until it is sent
	// or dead-lettered.
	Concurrency int
	// RetryDelay is the delay before sending again an outbound envelope
	// whose send failed, doubled per try up to a minute (1s).
	RetryDelay time.Duration
	// ShutdownGrace bounds how long [Run] lets sends in flight finish once
	// ctx ends (10s).
	ShutdownGrace time.Duration
	// Log receives the gateway's logs (nil = discard).
	Log *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Concurrency == 0 {
		o.Concurrency = 16
	}
	if o.RetryDelay == 0 {
		o.RetryDelay = time.Second
	}
	if o.ShutdownGrace == 0 {
		o.ShutdownGrace = 10 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return o
}

// Validate reports missing or impossible settings.
func (o Options) Validate() error {
	var errs []error
	if o.NC == nil || o.JS == nil {
		errs = append(errs, errors.New("gateway: a NATS connection with JetStream is required"))
	}
	if o.Channels == nil {
		errs = append(errs, errors.New("gateway: a channel provider is required"))
	}
	if o.Concurrency < 0 {
		errs = append(errs, errors.New("gateway: concurrency must be positive"))
	}
	if o.RetryDelay < 0 || o.ShutdownGrace < 0 {
		errs = append(errs, errors.New("gateway: retry delay and shutdown grace must be positive"))
	}
	return errors.Join(errs...)
}

// Gateway is a running gateway: its channels and their deliveries.
type Gateway struct {
	o   Options
	pub *ingress.Publisher
	mgr *channels.Manager
	kv  jetstream.KeyValue
	dlq *dlq.Writer
	// sendCtx is the context of every send: Start's without its
	// cancellation, cancelled when Stop's grace ends.
	sendCtx    context.Context
	cancelSend context.CancelFunc
	deliveries []*delivery
	stopOnce   sync.Once
	stopErr    error
}

// Run runs a gateway until ctx ends, then stops it within
// o.ShutdownGrace (see [Gateway.Stop]).
func Run(ctx context.Context, o Options) error {
	g, err := Start(ctx, o)
	if err != nil {
		return err
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.o.ShutdownGrace)
	defer cancel()
	return g.Stop(sctx)
}

// Start provides the channels, selects the enabled ones, starts them in
// order and then starts delivering the outbound envelopes of every
// selected channel that is a [channels.Sender]. It returns [ErrNoChannels]
// when nothing is enabled. The channels run until [Gateway.Stop] or until
// ctx ends.
func Start(ctx context.Context, o Options) (*Gateway, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	kv, err := o.JS.KeyValue(ctx, o.Names.DeliveredBucket())
	if err != nil {
		return nil, fmt.Errorf("binding delivered bucket: %w", err)
	}
	g := &Gateway{
		o:   o,
		pub: ingress.NewPublisher(o.JS, o.Names, o.Source),
		kv:  kv,
		dlq: dlq.NewWriter(o.JS, o.Names, o.Log),
	}
	g.mgr, err = channels.NewManager(o.Buffer, g.publish, o.Log)
	if err != nil {
		return nil, err
	}
	selected, err := selectChannels(ctx, o.Channels, g.mgr.Handle, o.Enabled)
	if err != nil {
		return nil, err
	}
	// The consumers exist before any channel runs: they deliver only
	// messages newer than themselves (DeliverNew), and a reply to the
	// first message a channel receives must not be older.
	type sending struct {
		name   string
		sender channels.Sender
		cons   jetstream.Consumer
	}
	var senders []sending
	var names []string
	for _, ch := range selected {
		names = append(names, ch.Name())
		if sender, ok := ch.(channels.Sender); ok {
			cons, err := g.consumer(ctx, ch.Name())
			if err != nil {
				return nil, err
			}
			senders = append(senders, sending{ch.Name(), sender, cons})
		}
	}
	g.sendCtx, g.cancelSend = context.WithCancel(context.WithoutCancel(ctx))
	if err := g.mgr.Start(ctx, selected); err != nil {
		g.cancelSend()
		return nil, err
	}
	for _, s := range senders {
		d, err := g.deliver(ctx, s.name, s.sender, s.cons)
		if err != nil {
			return nil, errors.Join(err, g.Stop(context.WithoutCancel(ctx)))
		}
		g.deliveries = append(g.deliveries, d)
	}
	o.Log.InfoContext(ctx, "gateway.started", "channels", names, "delivering", len(g.deliveries))
	return g, nil
}

// Selected returns the channels a gateway with provider p and enabled
// list enabled would run, or [ErrNoChannels]: a check before connecting
// (provide_channels only constructs channels). Messages handed to the
// channels it returns are refused.
func Selected(ctx context.Context, p Provider, enabled string) ([]channels.Channel, error) {
	return selectChannels(ctx, p, func(context.Context, *envelope.Envelope) error { return errNotRunning }, enabled)
}

var errNotRunning = errors.New("gateway: not running")

func selectChannels(ctx context.Context, p Provider, handler hooks.MessageHandler, enabled string) ([]channels.Channel, error) {
	provided, err := p(ctx, handler)
	if err != nil {
		return nil, fmt.Errorf("providing channels: %w", err)
	}
	all, err := channels.FromHooks(provided)
	if err != nil {
		return nil, err
	}
	selected := channels.Select(all, enabled)
	if len(selected) == 0 {
		return nil, ErrNoChannels
	}
	return selected, nil
}

// publish is the handler of the channels' messages: a message without an
// id is given one, then it goes to the inbound stream exactly like an
// HTTP request. An invalid envelope or a failed publish is returned to the
// channel.
func (g *Gateway) publish(ctx context.Context, msg *envelope.Envelope) error {
	if msg.ID == "" {
		msg.ID = events.NewID()
	}
	_, err := g.pub.Publish(ctx, msg)
	return err
}

// Stop drains the gateway: deliveries stop pulling and finish their sends
// in flight (hand back what they had not started), then the channels are
// stopped in reverse order and what debounce still holds is published.
// When ctx ends first, sends in flight are cancelled. Stop is idempotent.
func (g *Gateway) Stop(ctx context.Context) error {
	g.stopOnce.Do(func() {
		var errs []error
		for _, d := range g.deliveries {
			d.stopIntake()
		}
		for _, d := range g.deliveries {
			d.wait(ctx, g.cancelSend)
		}
		errs = append(errs, g.mgr.Stop(ctx))
		g.cancelSend()
		g.stopErr = errors.Join(errs...)
	})
	return g.stopErr
}
