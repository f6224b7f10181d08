package hooks

import (
	"context"
	"flag"
	"io"
	"iter"
	"strings"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/llm"
)

// This file holds the small types hooks exchange whose full-featured
// counterparts live in other packages (channels, the CLI, the turn
// registry). Each is the minimum the hooks need; the runtime adapts.

// Stream is a model output stream, the answer of run_model_stream. Range
// over it to receive deltas; breaking out of the loop closes the stream. A
// non-nil error is a failure of the model stage and the last item.
type Stream iter.Seq2[llm.Delta, error]

// TextStream returns a stream of one text delta.
func TextStream(text string) Stream {
	return func(yield func(llm.Delta, error) bool) {
		yield(llm.Delta{Kind: "text", Text: text}, nil)
	}
}

// Text consumes the stream and returns its text deltas concatenated, or
// the stream's error.
func (s Stream) Text() (string, error) {
	var b strings.Builder
	for d, err := range s {
		if err != nil {
			return "", err
		}
		if d.Kind == "text" {
			b.WriteString(d.Text)
		}
	}
	return b.String(), nil
}

// Channel is a message channel as provide_channels hands it out; its name
// is unique among the channels of a runtime. The channel manager asserts
// the richer channel interface it drives.
type Channel interface {
	Name() string
}

// MessageHandler receives the inbound messages a channel accepts.
type MessageHandler func(ctx context.Context, msg *envelope.Envelope) error

// ChannelsFunc provides channels that hand their messages to handler: the
// shape of provide_channels for code that is not a plugin (the builtin's
// collaborators, the gateway).
type ChannelsFunc func(ctx context.Context, handler MessageHandler) ([]Channel, error)

// CLICommand is a command a plugin adds to the `bub` CLI. The CLI adapter
// maps it onto its command library.
type CLICommand struct {
	// Use is the usage line: the command name, then its arguments.
	Use   string
	Short string
	Long  string
	// Hidden commands work but are not listed in help.
	Hidden bool
	// Flags, when non-nil, declares the command's flags; Run sees them
	// parsed.
	Flags *flag.FlagSet
	// Run runs the command with its positional arguments on the
	// command's standard streams.
	Run func(ctx context.Context, stdio CLIStdio, args []string) error
}

// CLIStdio are the standard streams of a plugin's CLI command.
type CLIStdio struct {
	In       io.Reader
	Out, Err io.Writer
}

// CLIApp is the CLI application register_cli_commands adds commands to.
type CLIApp interface {
	AddCommand(cmd CLICommand) error
}

// Question is one value onboard_config asks for.
type Question struct {
	// Key is the dotted configuration key the answer is stored under
	// (e.g. "model", "telegram.token"); non-interactive answers are given
	// by key.
	Key string
	// Prompt is the text shown to the person.
	Prompt string
	// Default is the answer when the person just presses enter.
	Default string
	// Secret answers are not echoed and never printed.
	Secret bool
	// Choices, when set, are the suggested answers.
	Choices []string
}

// Prompter asks questions during onboarding.
type Prompter interface {
	Ask(ctx context.Context, q Question) (string, error)
}

// ModelChoice is one selectable model.
type ModelChoice struct {
	// ID is the "provider:model" string.
	ID          string         `json:"id"`
	Name        string         `json:"name,omitempty"`
	Description string         `json:"description,omitempty"`
	Meta        map[string]any `json:"meta,omitempty"`
}

// RuntimeOptions are the runtime choices provide_runtime_options offers.
// Which one is selected is the caller's state, not the hook's.
type RuntimeOptions struct {
	Models []ModelChoice `json:"models"`
	// Current is the suggested current model id, "" for none.
	Current string `json:"current_model,omitempty"`
}

// AdmitAction is what an [AdmitDecision] asks for.
type AdmitAction string

// The admission actions.
const (
	// AdmitProcess runs the message now, concurrently with a running turn.
	AdmitProcess AdmitAction = "process"
	// AdmitDrop discards the message.
	AdmitDrop AdmitAction = "drop"
	// AdmitFollowUp runs the message after the session's running turn.
	AdmitFollowUp AdmitAction = "follow_up"
	// AdmitSteer injects the message into the running turn at its next
	// step; without a running turn it becomes a follow-up.
	AdmitSteer AdmitAction = "steer"
)

// AdmitDecision is the answer of admit_message.
type AdmitDecision struct {
	Action AdmitAction `json:"action"`
	Reason string      `json:"reason,omitempty"`
}

// TurnSnapshot is what admit_message knows about a session's turns.
type TurnSnapshot struct {
	SessionID     string `json:"session_id"`
	IsRunning     bool   `json:"is_running"`
	RunningCount  int    `json:"running_count"`
	PendingCount  int    `json:"pending_count"`
	SteeringCount int    `json:"steering_count"`
}

// SteeringInbox holds messages steered into running turns, keyed by the
// turn state (its thread id, else its session id).
type SteeringInbox interface {
	Enqueue(ctx context.Context, msg *envelope.Envelope, state *bub.State) error
	// Drain returns and removes every queued message of the state's key, in
	// arrival order.
	Drain(ctx context.Context, state *bub.State) ([]*envelope.Envelope, error)
	Count(ctx context.Context, state *bub.State) (int, error)
}
