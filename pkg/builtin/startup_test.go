package builtin_test

import (
	"context"
	"errors"
	"testing"

	"github.com/bubbus/bub/pkg/builtin"
	"github.com/bubbus/bub/pkg/channels"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/tape"
)

// TestAdmitMessageDelegatesToTheChannel: the builtin's admit_message asks
// the message's channel (the CLI steers while a turn runs) and has no
// opinion for channels that do not decide, or before SetChannels.
func TestAdmitMessageDelegatesToTheChannel(t *testing.T) {
	ctx := context.Background()
	p := builtin.New(builtin.Options{})
	cli := &envelope.Envelope{ID: "m", Channel: channels.CLIName}
	running := hooks.TurnSnapshot{IsRunning: true, RunningCount: 1}
	if _, ok, _ := p.AdmitMessage(ctx, hooks.AdmitMessageInput{Message: cli, Turn: running}); ok || p.MayAdmit(cli) {
		t.Error("before SetChannels the builtin answered")
	}
	p.SetChannels([]hooks.Channel{channels.HTTP{}, channels.CLI{}})
	tests := []struct {
		name    string
		msg     *envelope.Envelope
		turn    hooks.TurnSnapshot
		want    hooks.AdmitAction
		answers bool
	}{
		{"cli while running steers", cli, running, hooks.AdmitSteer, true},
		{"cli idle: no opinion", cli, hooks.TurnSnapshot{}, "", false},
		{"http never decides", &envelope.Envelope{ID: "h", Channel: channels.HTTPName}, running, "", false},
		{"unknown channel", &envelope.Envelope{ID: "x", Channel: "nope"}, running, "", false},
	}
	for _, tc := range tests {
		d, ok, err := p.AdmitMessage(ctx, hooks.AdmitMessageInput{SessionID: "s", Message: tc.msg, Turn: tc.turn})
		if err != nil || ok != tc.answers || d.Action != tc.want {
			t.Errorf("%s: %+v, ok %v, %v; want %q, ok %v", tc.name, d, ok, err, tc.want, tc.answers)
		}
		if ok && d.Reason != channels.CLISteerReason {
			t.Errorf("%s: reason %q", tc.name, d.Reason)
		}
		// MayAdmit tells ahead of time: only a deciding channel may answer.
		if may := p.MayAdmit(tc.msg); may != (tc.msg.Channel == channels.CLIName) {
			t.Errorf("%s: MayAdmit = %v", tc.name, may)
		}
	}
}

// TestStartupHooks: the builtin's defaults for the startup and scope
// hooks, and no opinion where it was given nothing.
func TestStartupHooks(t *testing.T) {
	ctx := context.Background()
	bare := builtin.New(builtin.Options{})
	if _, ok, err := bare.ProvideTapeStore(ctx, hooks.ProvideTapeStoreInput{}); ok || err != nil {
		t.Errorf("ProvideTapeStore without a store: ok %v, %v", ok, err)
	}
	if opts, err := bare.ProvideRuntimeOptions(ctx, hooks.RuntimeOptionsInput{}); opts != nil || err != nil {
		t.Errorf("ProvideRuntimeOptions without models = %+v, %v", opts, err)
	}
	if tc, ok, err := bare.BuildTapeContext(ctx, hooks.BuildTapeContextInput{}); !ok || err != nil || tc.Select != nil || tc.Anchor != tape.FromLastAnchor() {
		t.Errorf("BuildTapeContext = %+v, %v, %v; want Bub's default", tc, ok, err)
	}
	store := tape.NewMemoryStore()
	var registered bool
	boom := errors.New("boom")
	p := builtin.New(builtin.Options{Startup: builtin.Startup{
		TapeStore: func(context.Context) (tape.Store, error) { return store, nil },
		Models:    []string{"openai:a", "echo:echo"},
		Commands:  func(context.Context, hooks.CLIApp) error { registered = true; return nil },
		Channels: func(context.Context, hooks.MessageHandler) ([]hooks.Channel, error) {
			return nil, boom
		},
	}})
	if s, ok, err := p.ProvideTapeStore(ctx, hooks.ProvideTapeStoreInput{}); !ok || err != nil || s != store {
		t.Errorf("ProvideTapeStore = %v, %v, %v", s, ok, err)
	}
	opts, _ := p.ProvideRuntimeOptions(ctx, hooks.RuntimeOptionsInput{})
	if opts == nil || opts.Current != "openai:a" || len(opts.Models) != 2 || opts.Models[1].ID != "echo:echo" {
		t.Errorf("ProvideRuntimeOptions = %+v", opts)
	}
	if err := p.RegisterCLICommands(ctx, hooks.RegisterCLICommandsInput{}); err != nil || !registered {
		t.Errorf("RegisterCLICommands: %v, registered %v", err, registered)
	}
	if _, err := p.ProvideChannels(ctx, hooks.ProvideChannelsInput{}); !errors.Is(err, boom) {
		t.Errorf("ProvideChannels error = %v, want the provider's", err)
	}
}
