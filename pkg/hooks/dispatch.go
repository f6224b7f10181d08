package hooks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"

	"github.com/bubbus/bub/pkg/bub"
	bubconfig "github.com/bubbus/bub/pkg/config"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tools"
)

// This file defines how every hook is called; the package documentation
// summarises it. Tables hold implementations in priority order (most
// recently registered first), so every loop below runs in priority order
// unless it says otherwise.

// ---------------------------------------------------------------------------
// Calling implementations.

// Panics: the primitives of ordinary hooks (first, many, each) stop at the
// first failure anyway, so they recover a panic once per dispatch and
// attribute it to the implementation that was running. Isolated hooks must
// go on after a failure, so they guard every call (guard1/2/3).

// recoverAt turns a panic of list[*i] into a *HookError in *err.
func recoverAt[T any](err *error, h Hook, list []impl[T], i *int) {
	if v := recover(); v != nil {
		*err = &HookError{Hook: h, Plugin: list[*i].plugin, Err: &PanicError{Value: v, Stack: debug.Stack()}}
	}
}

// guard3, guard2 and guard1 call one implementation and turn a panic into a
// *PanicError.
func guard3[T, In, A, B any](ctx context.Context, h T, in In, call func(T, context.Context, In) (A, B, error)) (a A, b B, err error) {
	defer recoverTo(&err)
	return call(h, ctx, in)
}

func guard2[T, In, A any](ctx context.Context, h T, in In, call func(T, context.Context, In) (A, error)) (a A, err error) {
	defer recoverTo(&err)
	return call(h, ctx, in)
}

func guard1[T, In any](ctx context.Context, h T, in In, call func(T, context.Context, In) error) (err error) {
	defer recoverTo(&err)
	return call(h, ctx, in)
}

func recoverTo(err *error) {
	if v := recover(); v != nil {
		*err = &PanicError{Value: v, Stack: debug.Stack()}
	}
}

// ---------------------------------------------------------------------------
// The primitives.

// first is call_first: implementations run until one answers (ok=true),
// even with an empty answer. It returns the answer and the index of the
// implementation that gave it, or -1 when none did. The first error or
// panic stops the chain and propagates.
func first[T, In, R any](ctx context.Context, list []impl[T], h Hook, in In, call func(T, context.Context, In) (R, bool, error)) (r R, at int, err error) {
	at = -1
	var i int
	defer recoverAt(&err, h, list, &i)
	for i = range list {
		v, ok, callErr := call(list[i].hook, ctx, in)
		if callErr != nil {
			return r, -1, &HookError{Hook: h, Plugin: list[i].plugin, Err: callErr}
		}
		if ok {
			return v, i, nil
		}
	}
	return r, -1, nil
}

// many is call_many: every implementation runs and its result is appended
// to out, in priority order. The first error or panic stops and
// propagates. Callers pass a stack buffer as out so that a few
// implementations allocate nothing.
func many[T, In, R any](ctx context.Context, list []impl[T], h Hook, in In, call func(T, context.Context, In) (R, error), out []R) (_ []R, err error) {
	var i int
	defer recoverAt(&err, h, list, &i)
	for i = range list {
		v, callErr := call(list[i].hook, ctx, in)
		if callErr != nil {
			return out, &HookError{Hook: h, Plugin: list[i].plugin, Err: callErr}
		}
		out = append(out, v)
	}
	return out, nil
}

// each is call_many for hooks without results.
func each[T, In any](ctx context.Context, list []impl[T], h Hook, in In, call func(T, context.Context, In) error) (err error) {
	var i int
	defer recoverAt(&err, h, list, &i)
	for i = range list {
		if callErr := call(list[i].hook, ctx, in); callErr != nil {
			return &HookError{Hook: h, Plugin: list[i].plugin, Err: callErr}
		}
	}
	return nil
}

// observeAll runs every implementation of an agent-loop observer hook;
// failures are logged and skipped. Only cancellation of ctx stops it.
func observeAll[T, In any, S, C any](ctx context.Context, r *Registry[S, C], list []impl[T], h Hook, in In, call func(T, context.Context, In) error) error {
	for _, it := range list {
		if err := guard1(ctx, it.hook, in, call); err != nil {
			if stop := r.isolate(ctx, h, it.plugin, err); stop != nil {
				return stop
			}
		}
	}
	return nil
}

// isolate applies the agent-loop error rule to a failed implementation: it
// logs hook.agent_hook_failed and returns nil so the caller skips it — or,
// when ctx is done, returns ctx's error, because cancellation is not a
// plugin failure.
func (r *Registry[S, C]) isolate(ctx context.Context, h Hook, plugin string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	r.logFailure(ctx, "hook.agent_hook_failed", plugin, err, slog.String("hook", string(h)))
	return nil
}

func (r *Registry[S, C]) logFailure(ctx context.Context, msg, plugin string, err error, attr slog.Attr) {
	attrs := []slog.Attr{attr, slog.String("adapter", plugin), slog.Any("err", err)}
	if pe, ok := errors.AsType[*PanicError](err); ok {
		attrs = append(attrs, slog.String("stack", string(pe.Stack)))
	}
	r.logger.LogAttrs(ctx, slog.LevelWarn, msg, attrs...)
}

// ---------------------------------------------------------------------------
// Turn hooks.

// ResolveSession dispatches resolve_session (firstresult). When no
// implementation answers, or the answer is "", the session id is the
// message's, or "<channel>:<chat_id>" when it has none. An answer longer
// than [envelope.MaxNameBytes] is an error: session ids become subject
// tokens.
func (r *Registry[S, C]) ResolveSession(ctx context.Context, in ResolveSessionInput) (string, error) {
	id, _, err := first(ctx, r.tab.Load().resolveSession, HookResolveSession, in, SessionResolver.ResolveSession)
	if err != nil {
		return "", err
	}
	if id != "" {
		if err := envelope.CheckName(string(HookResolveSession)+": session id", id); err != nil {
			return "", err
		}
		return id, nil
	}
	msg := in.Message
	if msg == nil {
		msg = &envelope.Envelope{}
	}
	if msg.SessionID != "" {
		return msg.SessionID, nil
	}
	return msg.DefaultSessionID(), nil
}

// LoadState dispatches load_state (broadcast) and merges the results into
// state in reverse priority order, so a higher-priority plugin's key wins.
// Nothing is merged when an implementation fails.
func (r *Registry[S, C]) LoadState(ctx context.Context, in LoadStateInput, state *bub.State) error {
	var buf [8]map[string]any
	results, err := many(ctx, r.tab.Load().loadState, HookLoadState, in, StateLoader.LoadState, buf[:0])
	if err != nil {
		return err
	}
	for i := len(results) - 1; i >= 0; i-- {
		if results[i] != nil {
			state.Merge(results[i])
		}
	}
	return nil
}

// BuildPrompt dispatches build_prompt (firstresult). When no implementation
// answers, or the selected answer is empty, the prompt is the message
// content; an empty answer does not fall through to lower plugins.
func (r *Registry[S, C]) BuildPrompt(ctx context.Context, in BuildPromptInput) (llm.Content, error) {
	prompt, _, err := first(ctx, r.tab.Load().buildPrompt, HookBuildPrompt, in, PromptBuilder.BuildPrompt)
	if err != nil {
		return llm.Content{}, err
	}
	if prompt.IsEmpty() && in.Message != nil {
		return llm.Text(in.Message.Content), nil
	}
	return prompt, nil
}

// modelPaths reports which model hooks the highest-priority plugin with
// any model hook implements. Bub selects the model path per plugin, not per
// implementation.
func (t *table[S, C]) modelPaths() (text, stream bool) {
	top := len(t.plugins)
	if len(t.runModel) > 0 {
		top = t.runModel[0].rank
	}
	if len(t.runModelStream) > 0 {
		top = min(top, t.runModelStream[0].rank)
	}
	text = len(t.runModel) > 0 && t.runModel[0].rank == top
	stream = len(t.runModelStream) > 0 && t.runModelStream[0].rank == top
	return text, stream
}

// RunModel dispatches the non-streaming model stage. If the selected plugin
// implements run_model, run_model is called first-result; otherwise
// run_model_stream is, and its text deltas are concatenated (a missing
// stream is then an [ErrNoAnswer] error). ok is false when no plugin has a
// model hook or none answered.
func (r *Registry[S, C]) RunModel(ctx context.Context, in RunModelInput) (output string, ok bool, err error) {
	t := r.tab.Load()
	text, stream := t.modelPaths()
	switch {
	case text:
		out, i, err := first(ctx, t.runModel, HookRunModel, in, ModelRunner.RunModel)
		return out, i >= 0, err
	case stream:
		s, err := r.stream(ctx, t, in)
		if err != nil {
			return "", false, err
		}
		if s == nil {
			return "", false, fmt.Errorf("%s: %w", HookRunModelStream, ErrNoAnswer)
		}
		out, err := s.Text()
		return out, err == nil, err
	}
	return "", false, nil
}

// RunModelStream dispatches the streaming model stage. If the selected
// plugin implements run_model_stream, it is called first-result; otherwise
// run_model's answer becomes a stream of one text delta. ok is false when
// no plugin has a model hook or none answered.
func (r *Registry[S, C]) RunModelStream(ctx context.Context, in RunModelInput) (Stream, bool, error) {
	t := r.tab.Load()
	text, stream := t.modelPaths()
	switch {
	case stream:
		s, err := r.stream(ctx, t, in)
		return s, s != nil, err
	case text:
		out, i, err := first(ctx, t.runModel, HookRunModel, in, ModelRunner.RunModel)
		if err != nil || i < 0 {
			return nil, false, err
		}
		return TextStream(out), true, nil
	}
	return nil, false, nil
}

// stream calls run_model_stream first-result and guards the answer; it is
// nil when no implementation answered.
func (r *Registry[S, C]) stream(ctx context.Context, t *table[S, C], in RunModelInput) (Stream, error) {
	s, i, err := first(ctx, t.runModelStream, HookRunModelStream, in, ModelStreamer.RunModelStream)
	if err != nil || i < 0 {
		return nil, err
	}
	return r.guardStream(ctx, t.runModelStream[i].plugin, s), nil
}

// guardStream makes an answered stream safe to range over: a nil stream is
// empty, and a panic in the plugin's iterator (not in the consumer's loop
// body) becomes the stream's last error.
func (r *Registry[S, C]) guardStream(ctx context.Context, plugin string, s Stream) Stream {
	if s == nil {
		return func(func(llm.Delta, error) bool) {}
	}
	return func(yield func(llm.Delta, error) bool) {
		inBody, stopped := false, false
		defer func() {
			if inBody {
				return // the consumer's panic: let it propagate
			}
			v := recover()
			if v == nil {
				return
			}
			err := &HookError{Hook: HookRunModelStream, Plugin: plugin, Err: &PanicError{Value: v, Stack: debug.Stack()}}
			if stopped {
				r.logFailure(ctx, "hook.stream_failed_after_close", plugin, err, slog.String("hook", string(HookRunModelStream)))
				return
			}
			yield(llm.Delta{}, err)
		}()
		s(func(d llm.Delta, err error) bool {
			inBody = true
			more := yield(d, err)
			inBody, stopped = false, !more
			return more
		})
	}
}

// SaveState dispatches save_state (broadcast).
func (r *Registry[S, C]) SaveState(ctx context.Context, in SaveStateInput) error {
	return each(ctx, r.tab.Load().saveState, HookSaveState, in, StateSaver.SaveState)
}

// RenderOutbound dispatches render_outbound (broadcast) and concatenates
// the batches in priority order, skipping nil envelopes. An empty total
// becomes one echo envelope carrying the model output, the session id, and
// the inbound message's channel and chat id; the caller assigns its id.
func (r *Registry[S, C]) RenderOutbound(ctx context.Context, in RenderOutboundInput) ([]*envelope.Envelope, error) {
	var buf [8][]*envelope.Envelope
	batches, err := many(ctx, r.tab.Load().renderOutbound, HookRenderOutbound, in, OutboundRenderer.RenderOutbound, buf[:0])
	if err != nil {
		return nil, err
	}
	var out []*envelope.Envelope
	for _, batch := range batches {
		for _, e := range batch {
			if e != nil {
				out = append(out, e)
			}
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	echo := &envelope.Envelope{Content: in.ModelOutput, SessionID: in.SessionID}
	if in.Message != nil {
		echo.Channel, echo.ChatID, echo.InReplyTo = in.Message.Channel, in.Message.ChatID, in.Message.ID
	}
	return []*envelope.Envelope{echo}, nil
}

// DispatchOutbound dispatches dispatch_outbound (broadcast) for one
// outbound envelope; sent reports whether any implementation sent it.
func (r *Registry[S, C]) DispatchOutbound(ctx context.Context, in DispatchOutboundInput) (sent bool, err error) {
	var buf [8]bool
	results, err := many(ctx, r.tab.Load().dispatchOutbound, HookDispatchOutbound, in, OutboundDispatcher.DispatchOutbound, buf[:0])
	for _, s := range results {
		sent = sent || s
	}
	return sent, err
}

// RuntimeOptions dispatches provide_runtime_options (broadcast): models are
// appended in priority order and Current is the first non-empty one in
// priority order. Implementations answering nil are skipped.
func (r *Registry[S, C]) RuntimeOptions(ctx context.Context, in RuntimeOptionsInput) (RuntimeOptions, error) {
	var buf [8]*RuntimeOptions
	results, err := many(ctx, r.tab.Load().runtimeOptions, HookProvideRuntimeOptions, in, RuntimeOptionsProvider.ProvideRuntimeOptions, buf[:0])
	if err != nil {
		return RuntimeOptions{}, err
	}
	var opts RuntimeOptions
	for _, o := range results {
		if o == nil {
			continue
		}
		opts.Models = append(opts.Models, o.Models...)
		if opts.Current == "" {
			opts.Current = o.Current
		}
	}
	return opts, nil
}

// NotifyError dispatches on_error (observer) to every implementation. A
// failing implementation is logged as hook.on_error_failed and the others
// still run; nothing propagates, so on_error never hides the original
// error.
func (r *Registry[S, C]) NotifyError(ctx context.Context, in OnErrorInput) {
	for _, it := range r.tab.Load().onError {
		if err := guard1(ctx, it.hook, in, ErrorObserver.OnError); err != nil {
			r.logFailure(ctx, "hook.on_error_failed", it.plugin, err, slog.String("stage", in.Stage))
		}
	}
}

// SystemPrompt dispatches system_prompt (broadcast, joined): the fragments
// are reversed (builtin first) and the non-empty ones joined with "\n\n".
func (r *Registry[S, C]) SystemPrompt(ctx context.Context, in SystemPromptInput) (string, error) {
	var buf [8]string
	parts, err := many(ctx, r.tab.Load().systemPrompt, HookSystemPrompt, in, SystemPrompter.SystemPrompt, buf[:0])
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for i := len(parts) - 1; i >= 0; i-- {
		if parts[i] == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(parts[i])
	}
	return b.String(), nil
}

// AdmitMessage dispatches admit_message (firstresult). Without an answer
// the message is processed now (Bub's default concurrent scheduling).
func (r *Registry[S, C]) AdmitMessage(ctx context.Context, in AdmitMessageInput) (AdmitDecision, error) {
	d, i, err := first(ctx, r.tab.Load().admitMessage, HookAdmitMessage, in, MessageAdmitter.AdmitMessage)
	if err != nil {
		return AdmitDecision{}, err
	}
	if i < 0 {
		return AdmitDecision{Action: AdmitProcess}, nil
	}
	return d, nil
}

// MayAdmit reports whether an implementation of admit_message may decide
// msg's admission: one without [AdmissionScoper], or one whose MayAdmit
// says so. When none may, AdmitMessage would answer process.
func (r *Registry[S, C]) MayAdmit(msg *envelope.Envelope) bool {
	for _, im := range r.tab.Load().admitMessage {
		if sc, ok := As[AdmissionScoper](im.hook); !ok || sc.MayAdmit(msg) {
			return true
		}
	}
	return false
}

// ContinuePrompt dispatches continue_prompt (firstresult). An answer is
// required: without one it returns [ErrNoAnswer].
func (r *Registry[S, C]) ContinuePrompt(ctx context.Context, in ContinuePromptInput) (string, error) {
	prompt, i, err := first(ctx, r.tab.Load().continuePrompt, HookContinuePrompt, in, PromptContinuer.ContinuePrompt)
	if err == nil && i < 0 {
		err = fmt.Errorf("%s: %w", HookContinuePrompt, ErrNoAnswer)
	}
	return prompt, err
}

// ---------------------------------------------------------------------------
// Agent-loop hooks.

// BeforeLLMCall dispatches before_llm_call (chained). Each implementation
// sees the request as modified so far; a returned request replaces it (a
// request with nil ToolNames keeps the tools, an empty one withdraws them); a
// finish decision (which wins over a request returned with it) stops the
// chain and is returned. A failing implementation is logged and skipped,
// unless its error wraps [ErrAbort]. err is non-nil only for ErrAbort and
// for cancellation of ctx.
func (r *Registry[S, C]) BeforeLLMCall(ctx context.Context, in BeforeLLMCallInput) (llm.Request, *llm.Decision, error) {
	for _, it := range r.tab.Load().beforeLLMCall {
		start := r.now()
		req, dec, err := guard3(ctx, it.hook, in, LLMCallInterceptor.BeforeLLMCall)
		rec := DecisionRecord{Hook: HookBeforeLLMCall, Plugin: it.plugin, RunID: in.Request.RunID}
		switch {
		case err != nil:
			if stop := r.chainFailed(ctx, rec, err, start); stop != nil {
				return in.Request, nil, stop
			}
		case dec != nil:
			rec.Verdict, rec.LLMDecision = VerdictFinish, dec
			r.record(ctx, rec, start)
			return in.Request, dec, nil
		case req != nil:
			prev, next := in.Request, *req
			if next.ToolNames == nil {
				next.ToolNames = prev.ToolNames // absent keeps the tools; [] withdraws them
			}
			in.Request = next
			rec.Verdict, rec.Request, rec.Previous = VerdictModify, &next, &prev
			r.record(ctx, rec, start)
		}
	}
	return in.Request, nil, nil
}

// AfterLLMCall dispatches after_llm_call (observer): every implementation
// once, failures logged and skipped. err is non-nil only for cancellation.
func (r *Registry[S, C]) AfterLLMCall(ctx context.Context, in AfterLLMCallInput) error {
	return observeAll(ctx, r, r.tab.Load().afterLLMCall, HookAfterLLMCall, in, LLMCallObserver.AfterLLMCall)
}

// BeforeToolCall dispatches before_tool_call (chained). A proceed decision
// with arguments replaces the call's arguments with a copy that later
// implementations see; replace, deny and ask stop the chain and are
// returned (an ask whose timeout or default is invalid is a failure of
// its implementation);
// a decision with another action is logged and ignored. The returned call
// is the call to execute when the returned decision is nil. A failing
// implementation is logged and skipped, unless its error wraps [ErrAbort].
// err is non-nil only for ErrAbort and for cancellation of ctx.
func (r *Registry[S, C]) BeforeToolCall(ctx context.Context, in BeforeToolCallInput) (tools.Call, *tools.Decision, error) {
	for _, it := range r.tab.Load().beforeToolCall {
		start := r.now()
		dec, err := guard2(ctx, it.hook, in, ToolCallInterceptor.BeforeToolCall)
		rec := DecisionRecord{Hook: HookBeforeToolCall, Plugin: it.plugin, RunID: in.Call.RunID, ToolDecision: dec}
		switch {
		case err != nil:
			if stop := r.chainFailed(ctx, rec, err, start); stop != nil {
				return in.Call, nil, stop
			}
		case dec == nil:
		case dec.Action == tools.ActionProceed:
			if dec.Arguments != nil {
				in.Call = in.Call.WithArguments(dec.Arguments)
				rec.Verdict = VerdictModify
				r.record(ctx, rec, start)
			}
		case dec.Action == tools.ActionAsk && dec.ValidAsk() != nil:
			rec.ToolDecision = nil
			if stop := r.chainFailed(ctx, rec, dec.ValidAsk(), start); stop != nil {
				return in.Call, nil, stop
			}
		case dec.Action == tools.ActionReplace, dec.Action == tools.ActionDeny, dec.Action == tools.ActionAsk:
			rec.Verdict = Verdict(dec.Action)
			r.record(ctx, rec, start)
			return in.Call, dec, nil
		default:
			r.logger.LogAttrs(ctx, slog.LevelWarn, "hook.agent_hook_bad_return",
				slog.String("hook", string(HookBeforeToolCall)), slog.String("adapter", it.plugin),
				slog.String("action", string(dec.Action)))
		}
	}
	return in.Call, nil, nil
}

// AfterToolCall dispatches after_tool_call (observer): every implementation
// once with the same result object, failures logged and skipped. err is
// non-nil only for cancellation.
func (r *Registry[S, C]) AfterToolCall(ctx context.Context, in AfterToolCallInput) error {
	return observeAll(ctx, r, r.tab.Load().afterToolCall, HookAfterToolCall, in, ToolCallObserver.AfterToolCall)
}

// chainFailed handles a failed implementation of a chained hook: an
// ErrAbort error stops the call, cancellation stops it, anything else is
// isolated and recorded.
func (r *Registry[S, C]) chainFailed(ctx context.Context, rec DecisionRecord, err error, start time.Time) error {
	if errors.Is(err, ErrAbort) {
		shown := abortError(rec, err)
		rec.Verdict, rec.Err, rec.ToolDecision = VerdictAbort, shown, nil
		r.record(ctx, rec, start)
		return &HookError{Hook: rec.Hook, Plugin: rec.Plugin, Err: shown}
	}
	if stop := r.isolate(ctx, rec.Hook, rec.Plugin, err); stop != nil {
		return stop
	}
	rec.Verdict, rec.Err, rec.ToolDecision = VerdictFailed, err, nil
	r.record(ctx, rec, start)
	return nil
}

// aborted is the error of a call an implementation aborted: it reads as
// the *bub.Error its caller shows (the hook in front of the plugin's own
// *bub.Error, else a generic message) and still unwraps to the plugin's
// error, so errors.Is(err, ErrAbort) holds.
type aborted struct {
	shown *bub.Error
	cause error
}

func (e *aborted) Error() string   { return e.shown.Error() }
func (e *aborted) Unwrap() []error { return []error{e.shown, e.cause} }

// abortError turns an implementation's ErrAbort failure into the error the
// call fails with: "<hook>: <the plugin's *bub.Error message>" with its
// kind, or, for a plugin that gave none, `<hook>: plugin "<name>" aborted
// the call: <its error>` of kind unknown.
func abortError(rec DecisionRecord, err error) error {
	var be *bub.Error
	if errors.As(err, &be) {
		return &aborted{shown: &bub.Error{Kind: be.Kind, Message: string(rec.Hook) + ": " + be.Message, Details: be.Details}, cause: err}
	}
	why := strings.ReplaceAll(err.Error(), ErrAbort.Error(), "")
	why = strings.Join(strings.FieldsFunc(why, func(r rune) bool { return r == '\n' }), "; ")
	why = strings.Trim(why, " :;")
	if why == "" {
		why = "no reason given"
	}
	return &aborted{shown: bub.Errorf(bub.KindUnknown, "%s: plugin %q aborted the call: %s", rec.Hook, rec.Plugin, why), cause: err}
}

// now is the start time of an implementation call, measured only when a
// decision observer is installed.
func (r *Registry[S, C]) now() time.Time {
	if r.observe == nil {
		return time.Time{}
	}
	return time.Now()
}

func (r *Registry[S, C]) record(ctx context.Context, rec DecisionRecord, start time.Time) {
	if r.observe == nil {
		return
	}
	rec.Duration = time.Since(start)
	r.observe(ctx, rec)
}

// ---------------------------------------------------------------------------
// Startup hooks.

// Startup is the method set of the startup hooks (Bub's sync-only
// hooks): call them while a service or command starts, never per turn.
type Startup[S, C any] struct {
	r *Registry[S, C]
}

// Startup returns the startup hooks of the registry.
func (r *Registry[S, C]) Startup() Startup[S, C] { return Startup[S, C]{r: r} }

// RegisterCLICommands dispatches register_cli_commands (broadcast).
func (s Startup[S, C]) RegisterCLICommands(ctx context.Context, in RegisterCLICommandsInput) error {
	return each(ctx, s.r.tab.Load().registerCLICommands, HookRegisterCLICommands, in, CLICommandRegistrar.RegisterCLICommands)
}

// OnboardConfig dispatches onboard_config in REGISTRATION order (builtin
// first). Each implementation sees a copy of in.Current merged with the
// fragments so far; each fragment is merged by [bubconfig.Merge] (maps merge,
// any other value replaces), so a later, higher-priority fragment wins. A nil
// fragment is skipped. Returns the merged configuration.
func (s Startup[S, C]) OnboardConfig(ctx context.Context, in OnboardConfigInput) (map[string]any, error) {
	list := s.r.tab.Load().onboardConfig
	merged := bubconfig.Clone(in.Current)
	if merged == nil {
		merged = map[string]any{}
	}
	for i := len(list) - 1; i >= 0; i-- {
		in.Current = bubconfig.Clone(merged)
		fragment, err := guard2(ctx, list[i].hook, in, ConfigOnboarder.OnboardConfig)
		if err != nil {
			return nil, &HookError{Hook: HookOnboardConfig, Plugin: list[i].plugin, Err: err}
		}
		bubconfig.Merge(merged, fragment)
	}
	return merged, nil
}

// Channels dispatches provide_channels (broadcast, deduplicated): the
// channels of every implementation in priority order, keeping the first
// channel of each name.
func (s Startup[S, C]) Channels(ctx context.Context, in ProvideChannelsInput) ([]Channel, error) {
	batches, err := many(ctx, s.r.tab.Load().channels, HookProvideChannels, in, ChannelProvider.ProvideChannels, nil)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []Channel
	for _, batch := range batches {
		for _, ch := range batch {
			if ch == nil || seen[ch.Name()] {
				continue
			}
			seen[ch.Name()] = true
			out = append(out, ch)
		}
	}
	return out, nil
}

// TapeContext dispatches build_tape_context (firstresult); ok is false when
// no implementation answered.
func (s Startup[S, C]) TapeContext(ctx context.Context, in BuildTapeContextInput) (tapeContext C, ok bool, err error) {
	c, i, err := first(ctx, s.r.tab.Load().tapeContext, HookBuildTapeContext, in, TapeContextBuilder[C].BuildTapeContext)
	return c, i >= 0, err
}

// ---------------------------------------------------------------------------
// Scope hooks.

// resolveScope dispatches provide_tape_store and then
// provide_steering_inbox (both firstresult), once per scope. A resource
// nobody provides is the zero value. It also returns, in resolution order,
// the provided resources that implement [Closer]; when the inbox fails,
// those are closed at once.
func (r *Registry[S, C]) resolveScope(ctx context.Context) (store S, inbox SteeringInbox, closers []resource, err error) {
	t := r.tab.Load()
	store, i, err := first(ctx, t.tapeStore, HookProvideTapeStore, ProvideTapeStoreInput{}, TapeStoreProvider[S].ProvideTapeStore)
	if err != nil {
		return store, nil, nil, err
	}
	if i >= 0 {
		closers = appendCloser(closers, "tape store", store)
	}
	inbox, i, err = first(ctx, t.steeringInbox, HookProvideSteeringInbox, ProvideSteeringInboxInput{}, SteeringInboxProvider.ProvideSteeringInbox)
	if err != nil {
		var zero S
		return zero, nil, nil, errors.Join(err, closeAll(ctx, closers))
	}
	if i >= 0 {
		closers = appendCloser(closers, "steering inbox", inbox)
	}
	return store, inbox, closers, nil
}

// resource is a provided scope resource to close when the scope ends.
type resource struct {
	what string
	c    Closer
}

func appendCloser(list []resource, what string, v any) []resource {
	if c, ok := As[Closer](v); ok {
		list = append(list, resource{what, c})
	}
	return list
}

// closeAll closes the resources in reverse order, returning all failures.
func closeAll(ctx context.Context, list []resource) error {
	var errs []error
	for i := len(list) - 1; i >= 0; i-- {
		if err := guardLifecycle(ctx, list[i].c.Close); err != nil {
			errs = append(errs, fmt.Errorf("closing %s: %w", list[i].what, err))
		}
	}
	return errors.Join(errs...)
}
