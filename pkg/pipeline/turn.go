package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
)

// Hooks is what the pipeline dispatches; *hooks.Registry implements it
// with the rules of docs/hooks.md (fallbacks included).
type Hooks interface {
	ResolveSession(ctx context.Context, in hooks.ResolveSessionInput) (string, error)
	LoadState(ctx context.Context, in hooks.LoadStateInput, state *bub.State) error
	BuildPrompt(ctx context.Context, in hooks.BuildPromptInput) (llm.Content, error)
	RunModelStream(ctx context.Context, in hooks.RunModelInput) (hooks.Stream, bool, error)
	SaveState(ctx context.Context, in hooks.SaveStateInput) error
	RenderOutbound(ctx context.Context, in hooks.RenderOutboundInput) ([]*envelope.Envelope, error)
	DispatchOutbound(ctx context.Context, in hooks.DispatchOutboundInput) (bool, error)
	NotifyError(ctx context.Context, in hooks.OnErrorInput)
}

// Pipeline runs turns.
type Pipeline struct {
	hooks     Hooks
	workspace string
	log       *slog.Logger
}

// New returns a pipeline dispatching to h. workspace seeds every turn
// state's _runtime_workspace.
func New(h Hooks, workspace string, log *slog.Logger) *Pipeline {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Pipeline{hooks: h, workspace: workspace, log: log}
}

// Result is what a turn produced (Bub's TurnResult).
type Result struct {
	SessionID   string
	Prompt      llm.Content
	ModelOutput string
	Outbounds   []*envelope.Envelope
	State       *bub.State
}

// ErrNoModelOutput is reported to on_error when no plugin runs the model.
var ErrNoModelOutput = errors.New("no model skill returned output")

// StageTurn is the on_error stage of a failed turn.
const StageTurn = "turn"

// Turn is the input of one turn.
type Turn struct {
	// Inbound is the delivery of the turn's inbound message; the model
	// stage gets it ([hooks.RunModelInput.Inbound]).
	hooks.Inbound
	// SessionID is the message's session when the caller resolved it
	// already (the worker's admission gate does, to decide the
	// admission); "" makes the turn call resolve_session.
	SessionID string
}

// ProcessInbound runs one turn (Bub's process_inbound). in.Message is
// normalized in place first ([envelope.Envelope.Normalize]); its session is
// in.SessionID, else resolve_session's answer, and, like a mapping inbound
// in Bub, the message gains it when it has none, so on_error and every
// later stage see the session. Outbound envelopes get deterministic ids
// (<inbound id>/<index>), in_reply_to and their position in the batch
// before dispatch ([Address]), so a redelivered inbound never yields a
// second reply; one without a session id gets the resolved one. A failure
// is logged, reported to on_error (stage [StageTurn]) and returned.
func (f *Pipeline) ProcessInbound(ctx context.Context, in Turn) (res Result, err error) {
	msg := in.Message
	defer func() {
		if err != nil {
			f.log.ErrorContext(ctx, "turn.failed", "envelope", msg.ID, "session", res.SessionID, "err", err)
			f.hooks.NotifyError(ctx, hooks.OnErrorInput{Stage: StageTurn, Err: err, Message: msg})
		}
	}()
	msg.Normalize()
	sid := in.SessionID
	if sid == "" {
		if sid, err = f.hooks.ResolveSession(ctx, hooks.ResolveSessionInput{Message: msg}); err != nil {
			return res, err
		}
	}
	res.SessionID = sid
	if msg.SessionID == "" {
		msg.SessionID = sid
	}
	state := bub.NewState(map[string]any{bub.StateWorkspace: f.workspace})
	res.State = state
	if err := f.hooks.LoadState(ctx, hooks.LoadStateInput{Message: msg, SessionID: sid}, state); err != nil {
		return res, err
	}
	prompt, err := f.hooks.BuildPrompt(ctx, hooks.BuildPromptInput{Message: msg, SessionID: sid, State: state})
	if err != nil {
		return res, err
	}
	res.Prompt = prompt
	if res.ModelOutput, err = f.modelStage(ctx, &in.Inbound, sid, state, prompt); err != nil {
		return res, err
	}
	outs, err := f.hooks.RenderOutbound(ctx, hooks.RenderOutboundInput{Message: msg, SessionID: sid, State: state, ModelOutput: res.ModelOutput})
	if err != nil {
		return res, err
	}
	res.Outbounds = outs
	for i, out := range outs {
		if out.SessionID == "" {
			out.SessionID = sid
		}
		Address(out, msg, i, len(outs))
		if _, err := f.hooks.DispatchOutbound(ctx, hooks.DispatchOutboundInput{Message: out}); err != nil {
			return res, err
		}
	}
	return res, nil
}

// modelStage runs the model and then save_state, which sees the model
// stage's failure; a save_state error replaces the model's.
func (f *Pipeline) modelStage(ctx context.Context, in *hooks.Inbound, sid string, state *bub.State, prompt llm.Content) (output string, err error) {
	msg := in.Message
	defer func() {
		serr := f.hooks.SaveState(ctx, hooks.SaveStateInput{SessionID: sid, State: state, Message: msg, ModelOutput: output, Err: err})
		if serr != nil {
			err = serr
		}
	}()
	stream, ok, err := f.hooks.RunModelStream(ctx, hooks.RunModelInput{Prompt: prompt, SessionID: sid, State: state, Inbound: in})
	if err != nil {
		return "", err
	}
	if !ok {
		f.hooks.NotifyError(ctx, hooks.OnErrorInput{Stage: string(hooks.HookRunModel), Err: ErrNoModelOutput, Message: msg})
		if prompt.Parts == nil {
			return prompt.Text, nil
		}
		return msg.Content, nil
	}
	text, err := stream.Text()
	if err != nil {
		// As it is: on_error shows its text to the user (Bub's
		// str(error)), with no attribution of ours in front.
		return "", err
	}
	return text, nil
}

// Address gives an outbound envelope its deterministic id, the inbound id
// it answers and its place in the turn's batch. An id a plugin already set
// is kept.
func Address(out, in *envelope.Envelope, index, size int) {
	if out.ID == "" {
		out.ID = fmt.Sprintf("%s/%d", in.ID, index)
	}
	out.InReplyTo = in.ID
	out.BatchIndex, out.BatchSize = index, size
}
