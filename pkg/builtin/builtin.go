package builtin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tape"
	"github.com/bubbus/bub/pkg/tools"
)

// Name is the builtin plugin's name; it is registered first, so it has the
// lowest priority.
const Name = "builtin"

// Runner runs the agent for a turn's model stage and streams its output;
// in.Inbound says which delivery of which message the turn answers.
type Runner interface {
	RunAgent(ctx context.Context, in hooks.RunModelInput) (hooks.Stream, error)
}

// Outbox delivers one outbound envelope (publishes it for its channel).
type Outbox interface {
	Send(ctx context.Context, env *envelope.Envelope) error
}

// SwitchReader reads the latest model and reasoning-effort switches
// recorded on a session's tape (its tape.EventModelSwitch and
// tape.EventReasoningEffortSwitch events).
type SwitchReader interface {
	LatestSwitches(ctx context.Context, sessionID string) (tape.Switches, error)
}

// Dispatcher dispatches an outbound envelope through every
// dispatch_outbound implementation (the registry); on_error uses it.
type Dispatcher interface {
	DispatchOutbound(ctx context.Context, in hooks.DispatchOutboundInput) (bool, error)
}

// Options are the plugin's collaborators; every field may be nil. A
// process that runs turns (a worker) sets Runner and Outbox; without them
// run_model_stream and dispatch_outbound fail with [ErrNoRuntime], which
// is right for processes that only use the startup hooks (the CLI, the
// recorder, the gateway).
type Options struct {
	Runner   Runner
	Outbox   Outbox
	Switches SwitchReader
	// Startup are the collaborators of the startup and scope hooks.
	Startup Startup
	// Tools lists the tools for unknown-tool recovery.
	Tools *tools.Registry
	// Dispatch is set after the registry exists (see [Plugin.SetDispatcher]).
	Dispatch Dispatcher
	// Now is the clock of the prompt date line (time.Now).
	Now func() time.Time
}

// Plugin is the builtin plugin.
type Plugin struct {
	o Options
	// admitters is set by SetChannels.
	admitters admitterMap
}

// Compile-time guards: the hooks the builtin implements.
var (
	_ hooks.SessionResolver     = (*Plugin)(nil)
	_ hooks.StateLoader         = (*Plugin)(nil)
	_ hooks.PromptBuilder       = (*Plugin)(nil)
	_ hooks.ModelStreamer       = (*Plugin)(nil)
	_ hooks.StateSaver          = (*Plugin)(nil)
	_ hooks.OutboundRenderer    = (*Plugin)(nil)
	_ hooks.OutboundDispatcher  = (*Plugin)(nil)
	_ hooks.SystemPrompter      = (*Plugin)(nil)
	_ hooks.ErrorObserver       = (*Plugin)(nil)
	_ hooks.ToolCallInterceptor = (*Plugin)(nil)
	_ hooks.PromptContinuer     = (*Plugin)(nil)
)

// ErrNoRuntime is the error of the turn hooks that need a runner or an
// outbox in a process that has none.
var ErrNoRuntime = errors.New("builtin: this process runs no turns")

// New returns the builtin plugin.
func New(o Options) *Plugin {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Tools == nil {
		o.Tools = &tools.Registry{}
	}
	return &Plugin{o: o}
}

// SetDispatcher gives on_error the registry to dispatch error envelopes
// through; call it once the registry holds every plugin.
func (p *Plugin) SetDispatcher(d Dispatcher) { p.o.Dispatch = d }

// Name implements hooks.Plugin.
func (p *Plugin) Name() string { return Name }

// ResolveSession returns the message's session id when it is non-blank
// (untrimmed), else "<channel>:<chat_id>".
func (p *Plugin) ResolveSession(_ context.Context, in hooks.ResolveSessionInput) (string, bool, error) {
	if strings.TrimSpace(in.Message.SessionID) != "" {
		return in.Message.SessionID, true, nil
	}
	return in.Message.DefaultSessionID(), true, nil
}

// LoadState seeds the turn state: session_id, the message's context string,
// the session's latest model and reasoning-effort switches, a per-message
// model override (context.model) and the steering thread id
// (context.thread_id).
func (p *Plugin) LoadState(ctx context.Context, in hooks.LoadStateInput) (map[string]any, error) {
	st := map[string]any{bub.StateSessionID: in.SessionID}
	if cs := in.Message.ContextStr(); cs != "" {
		st[bub.StateContext] = cs
	}
	if p.o.Switches != nil {
		sw, err := p.o.Switches.LatestSwitches(ctx, in.SessionID)
		if err != nil {
			return nil, fmt.Errorf("reading model switches: %w", err)
		}
		if sw.Model != "" {
			st[bub.StateModel] = sw.Model
		}
		if sw.ReasoningEffort != "" {
			st[bub.StateReasoningEffort] = sw.ReasoningEffort
		}
	}
	if m := in.Message.Context.String("model"); m != "" {
		st[bub.StateModel] = m
	}
	if t := in.Message.Context.String("thread_id"); t != "" {
		st[bub.StateThreadID] = t
	}
	return st, nil
}

// BuildPrompt returns a comma command as it is (marking the message a
// command), and otherwise the context string, a date line and the content,
// with image and video media as URL parts and inline audio as input_audio
// parts.
func (p *Plugin) BuildPrompt(_ context.Context, in hooks.BuildPromptInput) (llm.Content, bool, error) {
	msg := in.Message
	if strings.HasPrefix(msg.Content, tools.CommandPrefix) {
		msg.Kind = envelope.KindCommand
		return llm.Text(msg.Content), true, nil
	}
	// The context line and the date line together, only for a message
	// with a context (Bub's context_prefix).
	text := msg.Content
	if cs := msg.ContextStr(); cs != "" {
		text = cs + "\n---Date: " + p.o.Now().Format("2006-01-02T15:04:05-07:00") + "---\n" + text
	}
	parts := mediaParts(msg.Media)
	if len(parts) == 0 {
		return llm.Text(text), true, nil
	}
	return llm.Content{Parts: append([]llm.Part{{Type: "text", Text: text}}, parts...)}, true, nil
}

func mediaParts(media []envelope.Media) []llm.Part {
	var parts []llm.Part
	for _, m := range media {
		if m.URL == "" {
			continue
		}
		switch m.Type {
		case "image":
			parts = append(parts, llm.Part{Type: "image_url", ImageURL: &llm.URLPart{URL: m.URL}})
		case "video":
			parts = append(parts, llm.Part{Type: "video_url", VideoURL: &llm.URLPart{URL: m.URL}})
		case "audio":
			if data, format, ok := inlineAudio(m.URL); ok {
				parts = append(parts, llm.Part{Type: "input_audio", InputAudio: &llm.AudioPart{Data: data, Format: format}})
			}
		}
	}
	return parts
}

// inlineAudio splits a data:audio/<mime>;base64,<data> URL; remote audio
// URLs are skipped as in Bub.
func inlineAudio(url string) (data, format string, ok bool) {
	rest, ok := strings.CutPrefix(url, "data:")
	if !ok {
		return "", "", false
	}
	mime, data, ok := strings.Cut(rest, ",")
	if !ok || !strings.HasPrefix(mime, "audio/") || !strings.HasSuffix(mime, ";base64") {
		return "", "", false
	}
	return data, AudioFormat(strings.TrimSuffix(mime, ";base64")), true
}

// AudioFormat maps an audio MIME type to the input_audio format name.
func AudioFormat(mime string) string {
	mime = strings.ToLower(strings.TrimSpace(strings.SplitN(mime, ";", 2)[0]))
	switch mime {
	case "audio/aiff", "audio/x-aiff":
		return "aiff"
	case "audio/flac", "audio/x-flac":
		return "flac"
	case "audio/mp4", "audio/x-m4a":
		return "m4a"
	case "audio/mpeg":
		return "mp3"
	case "audio/ogg":
		return "ogg"
	case "audio/wav", "audio/x-wav":
		return "wav"
	case "audio/webm":
		return "webm"
	}
	if f := strings.TrimPrefix(mime, "audio/"); f != "" {
		return f
	}
	return "unknown"
}

// RunModelStream runs the agent.
func (p *Plugin) RunModelStream(ctx context.Context, in hooks.RunModelInput) (hooks.Stream, bool, error) {
	if p.o.Runner == nil {
		return nil, false, ErrNoRuntime
	}
	s, err := p.o.Runner.RunAgent(ctx, in)
	return s, err == nil, err
}

// SaveState persists nothing: every turn's record is its tape.
func (p *Plugin) SaveState(context.Context, hooks.SaveStateInput) error { return nil }

// RenderOutbound answers with one envelope carrying the model output on the
// message's channel, chat, output channel and kind.
func (p *Plugin) RenderOutbound(_ context.Context, in hooks.RenderOutboundInput) ([]*envelope.Envelope, error) {
	m := in.Message
	return []*envelope.Envelope{{
		SessionID:     in.SessionID,
		Channel:       m.ChannelOrDefault(),
		ChatID:        m.ChatIDOrDefault(),
		Content:       in.ModelOutput,
		OutputChannel: orDefault(m.OutputChannel, envelope.Default),
		Kind:          orDefault(m.Kind, envelope.KindNormal),
	}}, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// DispatchOutbound sends the envelope through the outbox.
func (p *Plugin) DispatchOutbound(ctx context.Context, in hooks.DispatchOutboundInput) (bool, error) {
	if p.o.Outbox == nil {
		return false, ErrNoRuntime
	}
	if err := p.o.Outbox.Send(ctx, in.Message); err != nil {
		return false, err
	}
	return true, nil
}

// OnError tells the sender of a failed message what went wrong with one
// error envelope: "An error occurred at stage '<stage>': <error>". Its id
// is [ErrorReplyID]: deterministic, and distinct for the stages of one
// turn (a run_model report and a later turn failure are two replies, not
// one deduplicated away).
func (p *Plugin) OnError(ctx context.Context, in hooks.OnErrorInput) error {
	if in.Message == nil || p.o.Dispatch == nil {
		return nil
	}
	m := in.Message
	out := &envelope.Envelope{
		ID:        ErrorReplyID(m.ID, in.Stage),
		SessionID: orDefault(m.SessionID, "unknown"),
		Channel:   m.ChannelOrDefault(),
		ChatID:    m.ChatIDOrDefault(),
		Content:   fmt.Sprintf("An error occurred at stage '%s': %s", in.Stage, errorText(in.Err)),
		Kind:      envelope.KindError,
		InReplyTo: m.ID,
		BatchSize: 1,
	}
	out.OutputChannel = out.Channel
	_, err := p.o.Dispatch.DispatchOutbound(ctx, hooks.DispatchOutboundInput{Message: out})
	return err
}

// ErrorReplyID is the id of the error envelope on_error sends for a
// failure of stage in the turn of message messageID:
// "<message id>/error/<stage>".
func ErrorReplyID(messageID, stage string) string { return messageID + "/error/" + stage }

// errorText is the text Bub shows for an error: a *bub.Error anywhere in
// the chain as "[kind] message", else the error's text without the
// registry's attribution (an outer *hooks.HookError names the hook and
// plugin for the logs; Bub shows the plugin's own error).
func errorText(err error) string {
	if err == nil {
		return "unknown error"
	}
	var be *bub.Error
	if errors.As(err, &be) {
		return be.Error()
	}
	for {
		he, ok := err.(*hooks.HookError)
		if !ok || he.Err == nil {
			break
		}
		err = he.Err
	}
	return err.Error()
}

// BeforeToolCall replaces a model's call to a tool that does not exist
// with guidance naming close matches (Bub's unknown-tool recovery). Direct
// commands (no model call id) are left alone: they may run hidden tools.
func (p *Plugin) BeforeToolCall(_ context.Context, in hooks.BeforeToolCallInput) (*tools.Decision, error) {
	if in.Call.CallID == "" {
		return nil, nil
	}
	if guidance, unknown := p.o.Tools.Guidance(in.Call.Tool); unknown {
		return tools.Replace(guidance), nil
	}
	return nil, nil
}

// ContinuePrompt is "Continue the task until all targets are completed.",
// plus the message context when the state has one.
func (p *Plugin) ContinuePrompt(_ context.Context, in hooks.ContinuePromptInput) (string, bool, error) {
	prompt := "Continue the task until all targets are completed."
	if in.State != nil {
		if c := in.State.String(bub.StateContext); c != "" {
			prompt += " [context: " + c + "]"
		}
	}
	return prompt, true, nil
}

// SystemPrompt is Bub's default system prompt followed by the workspace's
// AGENTS.md (trimmed; "" when missing). The workspace is the state's
// (_runtime_workspace), else the current directory, as
// [bub.State.Workspace] decides, also when there is no state.
func (p *Plugin) SystemPrompt(_ context.Context, in hooks.SystemPromptInput) (string, error) {
	state := in.State
	if state == nil {
		state = bub.NewState(nil)
	}
	return DefaultSystemPrompt + "\n\n" + readAgentsFile(state.Workspace()), nil
}

func readAgentsFile(workspace string) string {
	if workspace == "" {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(workspace, "AGENTS.md"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// DefaultSystemPrompt is the builtin system prompt, in Bub's three tagged
// sections.
const DefaultSystemPrompt = `<general_instruct>
Call tools or skills to finish the task.
</general_instruct>
<response_instruct>
Before ending this run, decide whether a reply must be sent through the channel the message came from. Plain direct replies may be ignored by some channels: identify the channel from the message metadata (for example $telegram) and use that channel's skill to reply when one exists.
</response_instruct>
<context_contract>
A long context can make the model fail. Use tape.info to inspect token usage and tape.handoff to shorten the history when it grows too long.
</context_contract>`
