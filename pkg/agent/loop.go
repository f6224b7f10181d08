package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
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
// long: Bub's auto-handoff pattern, as Bub writes it (a wider one hands
// off on errors Bub fails the run for, such as "tokens per minute …
// limit", and the handoff's anchor cuts the session's context for good).
var contextOverflow = regexp.MustCompile(`(?i)context.{0,20}(?:length|window)|maximum.{0,20}context|token.{0,10}limit|prompt.{0,10}too long|tokens? > \d+ maximum`)

// Run executes one agent run (Bub's run_stream): an empty prompt answers
// "error: empty prompt"; a prompt starting with "," runs a comma command;
// anything else runs the agent loop. Every lifecycle event goes to r.Bus.
func (a *Agent) Run(ctx context.Context, r Run) (Output, error) {
	if r.Prompt.IsEmpty() {
		r.delta(0, "text", emptyPromptText, false)
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
// without pending messages, emitting RunStarted … RunFinished. Once
// RunStarted was emitted, RunFinished is too, whatever happened (a failing
// RunStarted handler included), and every StepStarted gets its
// StepFinished unless the run was cancelled.
func (a *Agent) loop(ctx context.Context, r *Run) (out Output, err error) {
	start := time.Now()
	model := r.model(a.settings)
	meta := events.RunMetadata{Answers: r.Answers}
	if len(r.AllowedTools) > 0 {
		meta.AllowedTools = r.AllowedTools
	}
	meta.AllowedSkills, _ = r.State.Get(bub.StateAllowedSkills)
	defer r.finish(ctx, start, &out, &err)
	if rec := r.Resume; rec != nil && rec.Started != nil {
		model = rec.Started.Model // run.started was recorded: the run goes on
	} else if _, err := events.Emit(ctx, r.Bus, &events.RunStarted{Meta: r.meta(), Prompt: r.Prompt, Model: model, Metadata: meta}); err != nil {
		return out, err
	}

	prompt := r.Prompt
	var carried []llm.Message // messages appended at the previous step's end
	handoffUsed := false
	var texts []string
	for step := 1; a.settings.MaxSteps == 0 || step <= a.settings.MaxSteps; step++ {
		out.Steps = step
		stepStart := time.Now()
		res, err := a.runStep(ctx, r, step, model, prompt, carried)
		carried = nil
		elapsed := func() int64 { return time.Since(stepStart).Milliseconds() }
		if err != nil {
			if ctx.Err() != nil {
				return out, err
			}
			if !handoffUsed && overflowed(err) {
				handoffUsed = true
				if rs := r.recordedStep(step); rs != nil && rs.Finished != nil {
					prompt = r.Prompt // the recorded attempt handed off already
					continue
				}
				if herr := r.Tape.Handoff(ctx, "auto_handoff/context_overflow", map[string]any{
					"reason": "context_length_exceeded", "error": err.Error(),
				}); herr != nil {
					err = errors.Join(err, herr)
					_, _ = events.Emit(ctx, r.Bus, &events.StepFinished{Meta: r.meta(), Step: step, Status: events.StepError, Err: err, ElapsedMS: elapsed()})
					return out, err
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
		carried = res.pending
		rs := r.recordedStep(step)
		if len(res.toolCalls) == 0 && len(carried) == 0 {
			if rs == nil || rs.Finished == nil {
				if _, err := events.Emit(ctx, r.Bus, &events.StepFinished{Meta: r.meta(), Step: step, Status: events.StepOK, ElapsedMS: elapsed()}); err != nil {
					return out, err
				}
			}
			out.Text, out.OK = strings.Join(texts, ""), true
			return out, nil
		}
		if rs != nil && rs.Finished != nil {
			prompt = llm.Text(rs.Finished.NextPrompt)
			continue
		}
		fin, err := events.Emit(ctx, r.Bus, &events.StepFinished{Meta: r.meta(), Step: step, Status: events.StepContinue, ElapsedMS: elapsed(), NextPrompt: DefaultContinuePrompt})
		if err != nil {
			return out, err
		}
		prompt = llm.Text(fin.NextPrompt)
	}
	return out, fmt.Errorf("%w=%d", ErrMaxSteps, a.settings.MaxSteps)
}

// runStep is what happens between StepStarted and StepFinished: the model
// call and its tools ([Agent.step]), then, when the model called no tool,
// MessagesPending at step end, whose messages make the run continue.
func (a *Agent) runStep(ctx context.Context, r *Run, step int, model string, prompt llm.Content, carried []llm.Message) (stepResult, error) {
	rs := r.recordedStep(step)
	if rs == nil || rs.Started == nil {
		if _, err := events.Emit(ctx, r.Bus, &events.StepStarted{Meta: r.meta(), Step: step, Prompt: prompt}); err != nil {
			return stepResult{}, err
		}
	}
	res, err := a.step(ctx, r, step, model, prompt, carried)
	if err != nil || len(res.toolCalls) > 0 {
		return res, err
	}
	if rs != nil && rs.PendingEnd != nil {
		res.pending = rs.PendingEnd.Messages
		return res, nil
	}
	pending, err := events.Emit(ctx, r.Bus, &events.MessagesPending{Meta: r.meta(), Step: step, AtStepEnd: true})
	if err != nil {
		return stepResult{}, err
	}
	res.pending = pending.Messages
	return res, nil
}

// finish emits RunFinished: status cancelled when the run failed because
// ctx ended, error when it failed otherwise. A RunFinished handler's error
// fails a run that had succeeded; a failed run's output is never OK.
func (r *Run) finish(ctx context.Context, start time.Time, out *Output, err *error) {
	status := events.RunOK
	switch {
	case *err != nil && ctx.Err() != nil:
		status = events.RunCancelled
	case *err != nil:
		status = events.RunError
	}
	fin := &events.RunFinished{Meta: r.meta(), Status: status, Steps: out.Steps, DurationMS: time.Since(start).Milliseconds(), Err: *err}
	// A run replayed to its end from Resume: the recording holds its end.
	if rec := r.Resume; rec == nil || rec.Finished == nil {
		if _, ferr := events.Emit(context.WithoutCancel(ctx), r.Bus, fin); ferr != nil && *err == nil {
			*err = ferr
		}
	}
	if *err != nil {
		out.OK = false
	}
}

// overflowed reports whether a step's error means the context is too long
// (Bub's auto-handoff pattern). A rate limit (HTTP 429) never does, whatever
// its message says: a handoff would cut the session's context because of
// a temporary condition.
func overflowed(err error) bool {
	var be *bub.Error
	if errors.As(err, &be) && be.Details["status_code"] == http.StatusTooManyRequests {
		return false
	}
	return contextOverflow.MatchString(err.Error())
}
