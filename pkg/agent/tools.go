package agent

import (
	"context"
	"time"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/tools"
)

// execute runs one tool call between ToolCallStarted and ToolCallFinished
// (Bub's ToolExecutor with AgentHooks): raw is the model's JSON argument
// text. A ToolCallStarted handler may replace the call, deny it (tool
// error) or replace its result; the executor emits ToolCallFinished for
// every completed call and none when ctx is cancelled. Malformed
// arguments become a tool error for the model, never a failed run. The
// returned error is a handler's error or ctx's.
func (a *Agent) execute(ctx context.Context, r *Run, step int, offered map[string]tools.Tool, call tools.Call, raw string) (*tools.Result, error) {
	args, argErr := tools.DecodeArguments(raw)
	call = call.WithArguments(args)
	return a.executeCall(ctx, r, step, call, offered, argErr)
}

// executeCall runs call with the tool of runnable (keyed by model-facing
// name) that the call names after the ToolCallStarted handlers: the tools
// offered to the model, or a comma command's tool (which may be hidden).
// A name runnable lacks runs Bub's unknown-tool placeholder, so a tool the
// run does not allow never runs.
//
// Resuming ([Run.Resume]), a call the recording holds the result of is
// answered from it, and a recorded start is not emitted again (its
// decision stands); a started call without a result runs again only when
// its tool is read_only or idempotent.
func (a *Agent) executeCall(ctx context.Context, r *Run, step int, call tools.Call, runnable map[string]tools.Tool, argErr error) (*tools.Result, error) {
	rec := r.Resume.Tool(step, call.CallID)
	started := &events.ToolCallStarted{Meta: r.meta(), Call: call}
	if rec != nil {
		if rec.Finished != nil {
			return recordedResult(r.RunID, rec.Finished), nil
		}
		started.Call.Tool, started.Decision = rec.Started.Tool, rec.Started.Decision
		started.Call = started.Call.WithArguments(rec.Started.Arguments)
	} else {
		var err error
		if started, err = events.Emit(ctx, r.Bus, started); err != nil {
			return nil, err
		}
	}
	call = started.Call
	res := &tools.Result{RunID: r.RunID, Tool: call.Tool}
	begin := time.Now()
	switch d := started.Decision; {
	case d != nil && d.Action == tools.ActionDeny:
		msg := d.Message
		if msg == "" {
			msg = "Tool '" + call.Tool + "' call denied by policy hook."
		}
		res.Err = &bub.Error{Kind: bub.KindTool, Message: msg}
	case d != nil && d.Action == tools.ActionReplace:
		res.Result = d.Result
	default:
		if d != nil && d.Arguments != nil {
			call = call.WithArguments(d.Arguments)
		}
		if argErr != nil {
			res.Err = bub.AsError(argErr)
			break
		}
		t, ok := runnable[call.Tool]
		if !ok {
			t = tools.UnknownTool(call.Tool)
		}
		if rec != nil && ok && t.EffectClass() == tools.EffectIrreversible {
			res.Err = &bub.Error{Kind: bub.KindTool, Message: InterruptedToolMessage}
			break
		}
		out, terr := tools.Invoke(ctx, t, r.toolContext(), call.Arguments)
		if ctx.Err() != nil {
			return nil, ctx.Err() // cancelled: never observed
		}
		res.Result = out
		if terr != nil {
			res.Err = terr
		}
	}
	res.Arguments = call.Arguments
	res.DurationMS = time.Since(begin).Milliseconds()
	if _, err := events.Emit(ctx, r.Bus, &events.ToolCallFinished{Meta: r.meta(), Call: call, Result: res}); err != nil {
		return nil, err
	}
	return res, nil
}

func (r *Run) toolContext() *tools.Context {
	tc := &tools.Context{RunID: r.RunID, SessionID: r.SessionID, State: r.State}
	if r.ToolContext != nil {
		r.ToolContext(tc)
	}
	return tc
}
