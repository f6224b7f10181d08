package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"strings"
	"time"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tools"
)

// DefaultContinuePrompt is the user message after a step that used tools
// (Bub's builtin continue_prompt); a StepFinished handler may replace it.
const DefaultContinuePrompt = "Continue the task until all targets are completed."

// contextOverflow matches provider errors that mean the context is too
// long (Bub's auto-handoff pattern).
var contextOverflow = regexp.MustCompile(`(?i)context.{0,40}(length|window)|maximum.{0,40}context|tokens?.{0,20}limit|prompt.{0,40}too long|tokens?\s*>\s*\d+\s*maximum`)

// Run executes one agent run (Bub's run_stream): an empty prompt answers
// "error: empty prompt"; a prompt starting with "," runs a comma command;
// anything else runs the agent loop. Every lifecycle event goes to r.Bus.
func (a *Agent) Run(ctx context.Context, r Run) (Output, error) {
	if r.Prompt.IsEmpty() {
		r.delta("text", emptyPromptText)
		return Output{Text: emptyPromptText}, nil
	}
	if r.State == nil {
		r.State = bub.NewState(nil)
	}
	r.State.SetDefault(bub.StateSessionID, r.SessionID)
	if r.Bus == nil {
		r.Bus = &events.Bus{}
	}
	if err := r.Tape.EnsureBootstrapAnchor(ctx); err != nil {
		return Output{}, fmt.Errorf("ensuring the bootstrap anchor: %w", err)
	}
	if r.Prompt.Parts == nil {
		if line, ok := tools.CommandLine(r.Prompt.Text); ok {
			return a.command(ctx, &r, line)
		}
	}
	return a.loop(ctx, &r)
}

func (r *Run) model(s Settings) string {
	if r.Model != "" {
		return r.Model
	}
	return s.Model
}

// loop is Bub's agent loop: steps until one ends without tool calls and
// without pending messages, emitting RunStarted … RunFinished.
func (a *Agent) loop(ctx context.Context, r *Run) (out Output, err error) {
	start := time.Now()
	model := r.model(a.settings)
	meta := maps.Clone(r.Metadata)
	if meta == nil {
		meta = map[string]any{}
	}
	meta["allowed_tools"] = nilIfEmpty(r.AllowedTools)
	if skills, ok := r.State.Get(bub.StateAllowedSkills); ok {
		meta["allowed_skills"] = skills
	}
	if _, err := events.Emit(ctx, r.Bus, &events.RunStarted{Meta: r.meta(), Prompt: r.Prompt, Model: model, Metadata: meta}); err != nil {
		return Output{}, err
	}
	defer func() {
		status := events.RunOK
		switch {
		case ctx.Err() != nil:
			status = events.RunCancelled
		case err != nil:
			status = events.RunError
		}
		fin := &events.RunFinished{Meta: r.meta(), Status: status, Steps: out.Steps, DurationMS: time.Since(start).Milliseconds(), Err: err}
		if _, ferr := events.Emit(context.WithoutCancel(ctx), r.Bus, fin); ferr != nil && err == nil {
			err = ferr
		}
	}()

	prompt := r.Prompt
	var carried []llm.Message // messages appended at the previous step's end
	handoffUsed := false
	var texts []string
	for step := 1; a.settings.MaxSteps == 0 || step <= a.settings.MaxSteps; step++ {
		out.Steps = step
		stepStart := time.Now()
		if _, err := events.Emit(ctx, r.Bus, &events.StepStarted{Meta: r.meta(), Step: step, Prompt: prompt}); err != nil {
			return out, err
		}
		res, err := a.step(ctx, r, step, model, prompt, carried)
		carried = nil
		elapsed := func() int64 { return time.Since(stepStart).Milliseconds() }
		if err != nil {
			if ctx.Err() != nil {
				return out, err
			}
			if !handoffUsed && contextOverflow.MatchString(err.Error()) {
				handoffUsed = true
				if herr := r.Tape.Handoff(ctx, "auto_handoff/context_overflow", map[string]any{
					"reason": "context_length_exceeded", "error": err.Error(),
				}); herr != nil {
					return out, errors.Join(err, herr)
				}
				if _, eerr := events.Emit(ctx, r.Bus, &events.StepFinished{Meta: r.meta(), Step: step, Status: events.StepAutoHandoff, Err: err, ElapsedMS: elapsed()}); eerr != nil {
					return out, eerr
				}
				prompt = r.Prompt
				continue
			}
			_, _ = events.Emit(ctx, r.Bus, &events.StepFinished{Meta: r.meta(), Step: step, Status: events.StepError, Err: err, ElapsedMS: elapsed()})
			return out, err
		}
		out.Usage = res.usage
		if res.text != "" {
			texts = append(texts, res.text)
		}
		more := len(res.toolCalls) > 0
		if !more {
			pending, err := events.Emit(ctx, r.Bus, &events.MessagesPending{Meta: r.meta(), Step: step, AtStepEnd: true})
			if err != nil {
				return out, err
			}
			carried = pending.Messages
			more = len(carried) > 0
		}
		if !more {
			if _, err := events.Emit(ctx, r.Bus, &events.StepFinished{Meta: r.meta(), Step: step, Status: events.StepOK, ElapsedMS: elapsed()}); err != nil {
				return out, err
			}
			out.Text, out.OK = strings.Join(texts, ""), true
			return out, nil
		}
		fin, err := events.Emit(ctx, r.Bus, &events.StepFinished{Meta: r.meta(), Step: step, Status: events.StepContinue, ElapsedMS: elapsed(), NextPrompt: DefaultContinuePrompt})
		if err != nil {
			return out, err
		}
		prompt = llm.Text(fin.NextPrompt)
	}
	return out, fmt.Errorf("%w=%d", ErrMaxSteps, a.settings.MaxSteps)
}

func nilIfEmpty(s []string) any {
	if len(s) == 0 {
		return nil
	}
	return s
}
