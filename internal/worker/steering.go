package worker

import (
	"context"
	"log/slog"

	"github.com/bubbus/bub/pkg/agent"
	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
)

// steeringPrompts is the agent's view of a turn's steering inbox
// ([Inbound.Steering]; the turn's agent run drains it at every
// MessagesPending): each
// steered message becomes the user message build_prompt makes of it, like
// the turn's own prompt (as in Bub: context line, date line, media).
type steeringPrompts struct {
	inbox   hooks.Steering
	reg     *Registry
	session string
	state   *bub.State
	log     *slog.Logger
}

var _ agent.Steering = steeringPrompts{}

// Drain builds the prompts of the steered messages. A message whose
// build_prompt fails is given to the model as its plain content (logged):
// steering never fails the run and never loses a message.
func (s steeringPrompts) Drain(ctx context.Context) ([]llm.Content, error) {
	envs, err := s.inbox.Drain(ctx)
	out := make([]llm.Content, 0, len(envs))
	for _, env := range envs {
		env.Normalize() // as ProcessInbound does for the turn's own message
		prompt, berr := s.reg.BuildPrompt(ctx, hooks.BuildPromptInput{Message: env, SessionID: s.session, State: s.state})
		if berr != nil {
			if s.log != nil {
				s.log.Warn("worker.steering_prompt_failed", "session", s.session, "envelope", env.ID, "err", berr)
			}
			prompt = llm.Text(env.Content)
		}
		out = append(out, prompt)
	}
	return out, err
}
