package channels

import (
	"context"

	"github.com/bubbus/bub/pkg/hooks"
)

// The builtin channels' names.
const (
	// HTTPName is the channel of the ingress HTTP API.
	HTTPName = "http"
	// CLIName is the channel of `bub chat` and `bub run`.
	CLIName = "cli"
)

// HTTP is the channel of the ingress HTTP API (`POST /v1/messages`). Its
// transport is the ingress service, which publishes requests and reads
// their replies itself, so in a gateway it starts and stops nothing and
// sends nothing.
type HTTP struct{}

// Name implements [Channel].
func (HTTP) Name() string { return HTTPName }

// Start implements [Channel]; the ingress service serves the HTTP API.
func (HTTP) Start(context.Context) error { return nil }

// Stop implements [Channel].
func (HTTP) Stop(context.Context) error { return nil }

// CLI is the terminal channel of `bub chat`, an
// [Interface] channel, so "all" does not enable it in a gateway. `bub
// chat` does the terminal I/O; the channel decides admission: while a turn
// of the session runs, a new line steers it.
type CLI struct{}

// Name implements [Channel].
func (CLI) Name() string { return CLIName }

// Start implements [Channel]; `bub chat` reads the terminal.
func (CLI) Start(context.Context) error { return nil }

// Stop implements [Channel].
func (CLI) Stop(context.Context) error { return nil }

// ChannelKind implements [Kinder]: the CLI is an Interface channel.
func (CLI) ChannelKind() Kind { return Interface }

// CLISteerReason is the steering reason of a line typed while a turn runs.
const CLISteerReason = "cli session is already generating"

// AdmitMessage implements [Admitter]: steer while the session runs a
// turn, else no opinion (process).
func (CLI) AdmitMessage(_ context.Context, in hooks.AdmitMessageInput) (hooks.AdmitDecision, bool, error) {
	if !in.Turn.IsRunning {
		return hooks.AdmitDecision{}, false, nil
	}
	return hooks.AdmitDecision{Action: hooks.AdmitSteer, Reason: CLISteerReason}, true, nil
}

// Compile-time guards.
var (
	_ Channel  = HTTP{}
	_ Channel  = CLI{}
	_ Kinder   = CLI{}
	_ Admitter = CLI{}
)
