package agent

import (
	"context"
	"errors"
	"log/slog"

	"github.com/bubbus/bub/pkg/agent/recording"
	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tools"
)

// Models calls a model named by call.Model ("provider:model", "" for the
// default); *llm.Router implements it.
type Models interface {
	Complete(ctx context.Context, call llm.Call, onDelta func(llm.Delta)) (llm.Response, error)
}

// Tape is the run's view of its session tape: the committed entries plus
// what this run recorded so far (a fork).
type Tape interface {
	ReadMessages(ctx context.Context) ([]llm.Message, error)
	EnsureBootstrapAnchor(ctx context.Context) error
	Handoff(ctx context.Context, name string, state map[string]any) error
}

// SystemPrompt returns the system prompt fragment of the hooks (joined
// system_prompt results) for a step's prompt text.
type SystemPrompt func(ctx context.Context, prompt string, state *bub.State) (string, error)

// Skills renders the skills block of a step's system prompt for the
// step's prompt text and the turn state (workspace, allowed_skills);
// *skills.Catalog implements it.
type Skills interface {
	Prompt(ctx context.Context, prompt string, state *bub.State) (string, error)
}

// Settings are the agent's model settings.
type Settings struct {
	// Model is the default "provider:model".
	Model string
	// MaxTokens is the default max_tokens of a request (0 = provider
	// default).
	MaxTokens int
	// MaxSteps bounds the steps of a run (0 = unlimited).
	MaxSteps int
	// Skills supplies the skills block, the last block of every step's
	// system prompt; nil means none. Give it the catalog the skill tool
	// reads.
	Skills Skills
}

// Agent runs agent loops. It holds no per-run state and is safe for
// concurrent runs.
type Agent struct {
	models   Models
	tools    *tools.Registry
	settings Settings
	system   SystemPrompt
	log      *slog.Logger
}

// New returns an agent calling models with the tools of reg. system may be
// nil (no hook fragment).
func New(models Models, reg *tools.Registry, settings Settings, system SystemPrompt, log *slog.Logger) *Agent {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if reg == nil {
		reg = &tools.Registry{}
	}
	return &Agent{models: models, tools: reg, settings: settings, system: system, log: log}
}

// Tools returns the agent's tool registry.
func (a *Agent) Tools() *tools.Registry { return a.tools }

// Run is one agent run.
type Run struct {
	// RunID correlates the run's events, hook calls and tape entries.
	RunID string
	// SessionID is the run's session.
	SessionID string
	// Prompt is text or content parts; a text starting with "," is a
	// comma command.
	Prompt llm.Content
	// State is the turn state.
	State *bub.State
	// Model overrides Settings.Model when non-empty.
	Model string
	// Tape is the run's tape fork.
	Tape Tape
	// Bus receives the run's lifecycle events.
	Bus *events.Bus
	// OnDelta, when set, receives text and reasoning deltas as they
	// stream, with the step that streamed them.
	OnDelta func(Delta)
	// AllowedTools limits the tools offered to the model (nil = all):
	// runtime or model-facing names, trimmed and matched in any case, as
	// Bub's resolve_tool_names does. An unknown name fails the run's
	// first step. The model can run only the offered tools; a call to any
	// other gets Bub's "Unknown tool name" error as its result.
	AllowedTools []string
	// ToolContext adds fields to each tool call's context (may be nil).
	ToolContext func(*tools.Context)
	// Answers is the inbound delivery the run answers, recorded in
	// RunStarted's metadata, or in CommandFinished for a comma command;
	// zero for none.
	Answers events.Answers
	// Approvals parks the tool calls a before_tool_call hook asks a person
	// about (nil: such a call is denied, as nobody can be asked).
	Approvals Approver
	// Resume, when set, is the recording of an earlier attempt of this run
	// (its worker died; see docs/durable.md): the run continues it instead
	// of starting over. Every event the recording holds is answered from
	// it and not emitted again — no handler (hook) runs for it, no sink
	// sees it — so completed model calls are not made again and completed
	// tool calls not run again; a tool call that started but has no
	// recorded result runs again only when its tool is read_only or
	// idempotent, else it fails with [InterruptedToolMessage]. The rest of
	// the run is emitted as usual. The caller gives the run the recorded
	// run's prompt, and its tape and event sinks what the recording holds.
	Resume *recording.Run
}

// Delta is a token delta of a run.
type Delta struct {
	llm.Delta
	// Step is the step whose model call streamed it (0 for the answer of
	// a comma command or an empty prompt).
	Step int
	// Replayed marks the text of a model call answered from [Run.Resume]:
	// the earlier attempt streamed it already.
	Replayed bool
}

// Output is what a run produced.
type Output struct {
	// Text is the model output shown to the user: every text the run
	// answered, concatenated.
	Text string
	// OK is false for the empty-prompt error answer.
	OK bool
	// Steps is the number of steps taken.
	Steps int
	// Usage is the last provider call's usage.
	Usage *llm.Usage
}

// emptyPromptText is Bub's answer to an empty prompt.
const emptyPromptText = "error: empty prompt"

// ErrMaxSteps is wrapped by the error of a run that used every allowed
// step without finishing.
var ErrMaxSteps = errors.New("max_steps_reached")

func (r *Run) meta() events.Meta {
	return events.Meta{State: r.State, RunID: r.RunID, SessionID: r.SessionID}
}

func (r *Run) delta(step int, kind, text string, replayed bool) {
	if r.OnDelta != nil && text != "" {
		r.OnDelta(Delta{Delta: llm.Delta{Kind: kind, Text: text}, Step: step, Replayed: replayed})
	}
}
