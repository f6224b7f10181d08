package builtin

import (
	"context"
	"sync/atomic"

	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/tape"
)

// Startup are the collaborators of the builtin's startup and scope hooks,
// the defaults Bub's builtin provides. A nil field makes the
// builtin answer its hook with no opinion.
type Startup struct {
	// Commands registers Bub's own commands (run, chat, up, …) on the CLI
	// (register_cli_commands).
	Commands func(ctx context.Context, app hooks.CLIApp) error
	// TapeStore opens the default tape store, JetStream
	// (provide_tape_store).
	TapeStore func(ctx context.Context) (tape.Store, error)
	// Channels returns the builtin channels: http, cli and telegram
	// (provide_channels).
	Channels hooks.ChannelsFunc
	// Models are the configured model ids (BUB_MODEL, then
	// BUB_FALLBACK_MODELS), offered by provide_runtime_options.
	Models []string
}

// Compile-time guards: the startup, scope and admission hooks.
var (
	_ hooks.CLICommandRegistrar              = (*Plugin)(nil)
	_ hooks.TapeStoreProvider[tape.Store]    = (*Plugin)(nil)
	_ hooks.TapeContextBuilder[tape.Context] = (*Plugin)(nil)
	_ hooks.ChannelProvider                  = (*Plugin)(nil)
	_ hooks.RuntimeOptionsProvider           = (*Plugin)(nil)
	_ hooks.MessageAdmitter                  = (*Plugin)(nil)
	_ hooks.AdmissionScoper                  = (*Plugin)(nil)
)

// RegisterCLICommands registers Bub's own commands.
func (p *Plugin) RegisterCLICommands(ctx context.Context, in hooks.RegisterCLICommandsInput) error {
	if p.o.Startup.Commands == nil {
		return nil
	}
	return p.o.Startup.Commands(ctx, in.App)
}

// ProvideTapeStore opens the default tape store.
func (p *Plugin) ProvideTapeStore(ctx context.Context, _ hooks.ProvideTapeStoreInput) (tape.Store, bool, error) {
	if p.o.Startup.TapeStore == nil {
		return nil, false, nil
	}
	s, err := p.o.Startup.TapeStore(ctx)
	return s, err == nil, err
}

// BuildTapeContext returns Bub's default tape context: the entries after
// the last anchor, through [tape.DefaultSelector].
func (p *Plugin) BuildTapeContext(context.Context, hooks.BuildTapeContextInput) (tape.Context, bool, error) {
	return tape.Context{}, true, nil
}

// ProvideChannels returns the builtin channels.
func (p *Plugin) ProvideChannels(ctx context.Context, in hooks.ProvideChannelsInput) ([]hooks.Channel, error) {
	if p.o.Startup.Channels == nil {
		return nil, nil
	}
	return p.o.Startup.Channels(ctx, in.Handler)
}

// ProvideRuntimeOptions offers the configured models, the first as the
// current one.
func (p *Plugin) ProvideRuntimeOptions(context.Context, hooks.RuntimeOptionsInput) (*hooks.RuntimeOptions, error) {
	if len(p.o.Startup.Models) == 0 {
		return nil, nil
	}
	opts := &hooks.RuntimeOptions{Current: p.o.Startup.Models[0]}
	for i, id := range p.o.Startup.Models {
		c := hooks.ModelChoice{ID: id, Description: "configured model (BUB_MODEL)"}
		if i > 0 {
			c.Description = "fallback model (BUB_FALLBACK_MODELS)"
		}
		opts.Models = append(opts.Models, c)
	}
	return opts, nil
}

// SetChannels gives admit_message the channels of the runtime (what
// provide_channels returned), so it can delegate to the message's
// channel; call it once the registry holds every plugin.
func (p *Plugin) SetChannels(chs []hooks.Channel) {
	m := make(map[string]hooks.MessageAdmitter, len(chs))
	for _, ch := range chs {
		if a, ok := hooks.As[hooks.MessageAdmitter](ch); ok {
			m[ch.Name()] = a
		}
	}
	p.admitters.Store(&m)
}

// AdmitMessage delegates to the message's channel when that channel
// decides admission (the CLI channel steers while a turn runs), and
// otherwise has no opinion, which means process.
func (p *Plugin) AdmitMessage(ctx context.Context, in hooks.AdmitMessageInput) (hooks.AdmitDecision, bool, error) {
	m := p.admitters.Load()
	if m == nil || in.Message == nil {
		return hooks.AdmitDecision{}, false, nil
	}
	a, ok := (*m)[in.Message.Channel]
	if !ok {
		return hooks.AdmitDecision{}, false, nil
	}
	return a.AdmitMessage(ctx, in)
}

// MayAdmit implements [hooks.AdmissionScoper]: only a message of a
// channel that decides admission may get an answer.
func (p *Plugin) MayAdmit(msg *envelope.Envelope) bool {
	m := p.admitters.Load()
	if m == nil || msg == nil {
		return false
	}
	_, ok := (*m)[msg.Channel]
	return ok
}

// admitterMap is the channels' admission deciders by channel name.
type admitterMap = atomic.Pointer[map[string]hooks.MessageAdmitter]
