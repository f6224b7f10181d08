package agent

import (
	"context"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tools"
)

// stepResult is what one step produced.
type stepResult struct {
	text      string
	toolCalls []llm.ToolCall
	usage     *llm.Usage
	// pending are the messages MessagesPending handlers appended at step
	// end (see [Agent.runStep]).
	pending []llm.Message
}

// step is one model call and the tool calls it asked for (Bub's
// ModelRunner.run): resolve the offered tools, build the system prompt and
// messages, let LLMCallStarted handlers change or finish the request, call
// the provider, run the tools concurrently, and emit ChatFinished with
// what to record.
func (a *Agent) step(ctx context.Context, r *Run, step int, model string, prompt llm.Content, carried []llm.Message) (stepResult, error) {
	offered, err := a.offeredTools(r.AllowedTools)
	if err != nil {
		return stepResult{}, err
	}
	system, err := a.systemPrompt(ctx, r, prompt, offered)
	if err != nil {
		return stepResult{}, err
	}
	rs := r.recordedStep(step)
	appended := carried
	if rs != nil && rs.Pending != nil {
		appended = rs.Pending.Messages
	} else {
		pending, err := events.Emit(ctx, r.Bus, &events.MessagesPending{Meta: r.meta(), Step: step, Messages: carried})
		if err != nil {
			return stepResult{}, err
		}
		appended = pending.Messages
	}
	newMessages := append(append([]llm.Message(nil), appended...), llm.Message{Role: llm.RoleUser, Content: prompt})
	chat := &events.ChatFinished{Meta: r.meta(), SystemPrompt: system}
	emitChat := func() error {
		if rs != nil && rs.Chat != nil {
			return nil // recorded: the tape has it
		}
		_, err := events.Emit(ctx, r.Bus, chat)
		return err
	}

	history, err := r.Tape.ReadMessages(ctx)
	if err != nil {
		chat.ContextErr, chat.Err = err, err
		if eerr := emitChat(); eerr != nil {
			return stepResult{}, eerr
		}
		return stepResult{}, err
	}
	chat.NewMessages = newMessages
	messages := make([]llm.Message, 0, len(history)+len(newMessages)+1)
	if system != "" {
		messages = append(messages, llm.Message{Role: llm.RoleSystem, Content: llm.Text(system)})
	}
	messages = append(append(messages, history...), newMessages...)
	req := llm.Request{RunID: r.RunID, Model: model, Messages: messages, ToolNames: modelNames(offered), MaxTokens: a.settings.MaxTokens}

	started := &events.LLMCallStarted{Meta: r.meta(), Request: req}
	if rs.CallDone() {
		// Answered by the recorded attempt: its hooks decided already.
		started.Request, started.Decision = recordedRequest(req, rs.LLMStarted)
	} else if started, err = events.Emit(ctx, r.Bus, started); err != nil {
		return stepResult{}, err
	}
	// What the handlers made of the request is what the provider gets and
	// what ChatFinished (the tape) records.
	req = started.Request
	chat.SystemPrompt, chat.NewMessages = req.SystemPrompt(), effectiveNew(req, history, len(newMessages))
	chat.Provider, chat.Model = providerOf(req.Model), req.Model
	offered = offeredByName(offered, req.ToolNames)
	if d := started.Decision; d != nil {
		text := d.Text
		chat.ResponseText = &text
		r.delta(step, "text", text, rs.CallDone())
		return stepResult{text: text}, emitChat()
	}

	resp, err := a.complete(ctx, r, step, req, offered)
	if ctx.Err() != nil {
		return stepResult{}, ctx.Err() // cancelled: no LLMCallFinished
	}
	if err != nil {
		return stepResult{}, err
	}
	chat.Usage = resp.Usage
	out := stepResult{text: resp.Text, toolCalls: resp.ToolCalls, usage: resp.Usage}
	if len(resp.ToolCalls) == 0 {
		text := resp.Text
		chat.ResponseText = &text
		return out, emitChat()
	}
	results, err := a.runTools(ctx, r, step, byModelName(offered), resp.ToolCalls)
	if err != nil {
		return stepResult{}, err
	}
	chat.ToolCalls, chat.ToolResults = resp.ToolCalls, results
	return out, emitChat()
}

// complete is the step's model call between LLMCallStarted and
// LLMCallFinished; a call the recording answered is not made again (its
// text is handed to OnDelta as replayed) and emits nothing. The error is
// the provider's, or a handler's.
func (a *Agent) complete(ctx context.Context, r *Run, step int, req llm.Request, offered []tools.Tool) (llm.Response, error) {
	if rs := r.recordedStep(step); rs != nil && rs.LLMFinished != nil {
		resp, err := recordedResponse(rs.LLMFinished)
		r.delta(step, "text", resp.Text, true)
		return resp, err
	}
	callStart := time.Now()
	resp, err := a.models.Complete(ctx, llm.Call{
		Model:           req.Model,
		Messages:        append([]llm.Message(nil), req.Messages...),
		Tools:           a.tools.Schemas(offered),
		MaxTokens:       req.MaxTokens,
		ReasoningEffort: r.State.String(bub.StateReasoningEffort),
	}, func(d llm.Delta) { r.delta(step, d.Kind, d.Text, false) })
	if ctx.Err() != nil {
		return resp, ctx.Err()
	}
	result := llm.Result{RunID: r.RunID, Text: resp.Text, ToolCalls: resp.ToolCalls, Usage: resp.Usage, Err: err, DurationMS: time.Since(callStart).Milliseconds()}
	if _, eerr := events.Emit(ctx, r.Bus, &events.LLMCallFinished{Meta: r.meta(), Request: req, Result: result}); eerr != nil {
		return resp, eerr
	}
	return resp, err
}

// effectiveNew returns the messages of the step in req, the request after
// the LLMCallStarted handlers: the conversation after history when it
// still starts with history, otherwise its last n messages (the step's
// messages were appended last).
func effectiveNew(req llm.Request, history []llm.Message, n int) []llm.Message {
	conv := req.Conversation()
	if len(conv) >= len(history) && reflect.DeepEqual(conv[:len(history)], history) {
		return conv[len(history):]
	}
	return conv[max(0, len(conv)-n):]
}

// offeredByName keeps the tools of offered that names (a request's
// ToolNames, model-facing) still lists: a handler can withdraw tools from
// a call; a name that was not offered offers nothing.
func offeredByName(offered []tools.Tool, names []string) []tools.Tool {
	if slices.EqualFunc(offered, names, func(t tools.Tool, name string) bool { return t.ModelName() == name }) {
		return offered // the handlers withdrew none
	}
	out := offered[:0:0]
	for _, t := range offered {
		if slices.Contains(names, t.ModelName()) {
			out = append(out, t)
		}
	}
	return out
}

// systemPrompt joins the non-empty blocks with blank lines (as Bub does):
// the hooks' fragment, the tools block, then the skills block.
func (a *Agent) systemPrompt(ctx context.Context, r *Run, prompt llm.Content, offered []tools.Tool) (string, error) {
	var blocks []string
	if a.system != nil {
		s, err := a.system(ctx, prompt.PlainText(), r.State)
		if err != nil {
			return "", err
		}
		blocks = append(blocks, s)
	}
	blocks = append(blocks, a.tools.Prompt(offered))
	if a.settings.Skills != nil {
		s, err := a.settings.Skills.Prompt(ctx, prompt.PlainText(), r.State)
		if err != nil {
			return "", err
		}
		blocks = append(blocks, s)
	}
	nonEmpty := blocks[:0]
	for _, b := range blocks {
		if b != "" {
			nonEmpty = append(nonEmpty, b)
		}
	}
	return strings.Join(nonEmpty, "\n\n"), nil
}

// offeredTools returns the agent-usable tools, limited to allowed when it
// is not nil. Allowed names resolve like Bub's resolve_tool_names (runtime
// or model-facing names, trimmed, any case); an unknown one is an
// *tools.UnknownToolsError.
func (a *Agent) offeredTools(allowed []string) ([]tools.Tool, error) {
	if allowed == nil {
		return a.tools.Usable(), nil
	}
	names, err := a.tools.ResolveNames(allowed, nil)
	if err != nil {
		return nil, err
	}
	out := a.tools.Select(names)
	return slices.DeleteFunc(out, func(t tools.Tool) bool { return t.Hidden }), nil
}

// byModelName indexes tools by model-facing name: the tools a model's call
// may run.
func byModelName(ts []tools.Tool) map[string]tools.Tool {
	m := make(map[string]tools.Tool, len(ts))
	for _, t := range ts {
		m[t.ModelName()] = t
	}
	return m
}

func modelNames(ts []tools.Tool) []string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.ModelName()
	}
	return names
}

func providerOf(model string) string {
	p, _, err := llm.ParseModel(model)
	if err != nil {
		return ""
	}
	return p
}

// runTools executes the calls of one model response (of step) concurrently
// among the offered tools and returns their model-facing results in call order:
// the result value, or a failed call's {kind, message, details?}.
func (a *Agent) runTools(ctx context.Context, r *Run, step int, offered map[string]tools.Tool, calls []llm.ToolCall) ([]any, error) {
	results := make([]any, len(calls))
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	for i, tc := range calls {
		wg.Go(func() {
			slot := strconv.Itoa(step) + "." + strconv.Itoa(i)
			res, err := a.execute(ctx, r, step, slot, offered, tools.Call{RunID: r.RunID, Tool: tc.Function.Name, CallID: tc.ID}, tc.Function.Arguments)
			results[i], errs[i] = modelResult(res), err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return results, nil
}

func modelResult(res *tools.Result) any {
	if res == nil {
		return nil
	}
	if res.Err != nil {
		return bub.AsError(res.Err).AsMap()
	}
	return res.Result
}
