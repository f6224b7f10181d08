package channels

import (
	"context"

	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
)

// Channel is a message channel (Bub's Channel). Constructing one is cheap
// and does no I/O: provide_channels may be called in processes that never
// start it (a worker asks a channel's admit_message). Its name is unique
// among a runtime's channels.
type Channel interface {
	hooks.Channel
	// Start begins receiving; it returns once the channel runs (or failed
	// to start). The channel keeps running until Stop is called or ctx
	// ends.
	Start(ctx context.Context) error
	// Stop stops receiving and releases what Start acquired. It is called
	// once for every channel whose Start succeeded.
	Stop(ctx context.Context) error
}

// Sender is the optional capability of delivering an outbound envelope
// whose output_channel names the channel (Bub's send; without it delivery
// is a no-op).
type Sender interface {
	Send(ctx context.Context, msg *envelope.Envelope) error
}

// Progress is what a [Sender] that delivers one envelope as several
// messages (a reply longer than the chat allows, in parts) resumes from:
// the gateway keeps it with the envelope's delivery claim, so a retry
// after a failed part does not send the parts already accepted again.
type Progress interface {
	// Sent is how many parts an earlier attempt had delivered.
	Sent() int
	// Delivered records that the first n parts are delivered; it is
	// called after each part, before the next is sent.
	Delivered(ctx context.Context, n int)
}

type progressKey struct{}

// WithProgress returns ctx carrying p for the Send it is passed to.
func WithProgress(ctx context.Context, p Progress) context.Context {
	return context.WithValue(ctx, progressKey{}, p)
}

// ProgressFrom returns the Progress of a Send's ctx, or one that starts
// from none and records nothing.
func ProgressFrom(ctx context.Context) Progress {
	if p, ok := ctx.Value(progressKey{}).(Progress); ok {
		return p
	}
	return noProgress{}
}

type noProgress struct{}

func (noProgress) Sent() int                            { return 0 }
func (noProgress) Delivered(ctx context.Context, n int) {}

// Debouncer is the optional capability of asking for debounced input
// (Bub's needs_debounce): messages of a session are
// batched until the conversation pauses.
type Debouncer interface {
	NeedsDebounce() bool
}

// Toggler is the optional capability of being disabled (Bub's enabled);
// a channel without it is enabled.
type Toggler interface {
	Enabled() bool
}

// Kind is the kind of a channel, which decides how BUB_ENABLED_CHANNELS
// selects it.
type Kind int

// The channel kinds.
const (
	// Regular channels are selected by "all".
	Regular Kind = iota
	// Interface channels (user-facing I/O such as the terminal) are
	// never selected by "all", only by name.
	Interface
	// Lifecycle channels (background runtime) are added whenever a
	// non-lifecycle channel is enabled by name.
	Lifecycle
)

// Kinder is the optional capability of declaring a [Kind]; a channel
// without it is [Regular].
type Kinder interface {
	ChannelKind() Kind
}

// Admitter is the optional capability of deciding admission for the
// channel's own messages (Bub's channel admit_message): the builtin
// plugin's admit_message delegates to the message's channel.
type Admitter interface {
	hooks.MessageAdmitter
}
