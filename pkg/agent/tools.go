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
// slot names the call's place in the run ("<step>.<index>"), which
// names an approval it asks for.
func (a *Agent) execute(ctx context.Context, r *Run, step int, slot string, offered map[string]tools.Tool, call tools.Call, raw string) (*tools.Result, error) {
	args, argErr := tools.DecodeArguments(raw)
	call = call.WithArguments(args)
	return a.executeCall(ctx, r, step, slot, call, offered, argErr)
}

// executeCall runs call with the tool of runnable (keyed by model-facing
// name) that the call names after the ToolCallStarted handlers (an ask
// decision parks it first, see [Agent.approve]): the tools
// offered to the model, or a comma command's tool (which may be hidden).
// A name runnable lacks runs Bub's unknown-tool placeholder, so a tool the
// run does not allow never runs.
//
// Resuming ([Run.Resume]), a call the recording holds the result of is
// answered from it, and a recorded start is not emitted again (its
// decision stands); a started call without a result runs again only when
// its tool is read_only or idempotent.
func (a *Agent) executeCall(ctx context.Context, r *Run, step int, slot string, call tools.Call, runnable map[string]tools.Tool, argErr error) (*tools.Result, error) {
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
	d := started.Decision
	if d != nil && d.Action == tools.ActionAsk {
		var err error
		if d, err = a.approve(ctx, r, slot, call, d); err != nil {
			return nil, err
		}
	}
	switch {
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

// Approver holds the tool calls a before_tool_call hook asked a person
// about (tools.Ask) until they are answered or their deadline passes. The
// worker's is durable (internal/approvals): the record outlives the
// worker, so a redelivered turn finds the approval its first delivery
// asked for, and its answer.
type Approver interface {
	// Request records the approval a (or finds the record of a.ID that an
	// earlier delivery of the turn made) and returns it; created reports
	// whether this call made it.
	Request(ctx context.Context, a Approval) (rec Approval, created bool, err error)
	// Wait blocks until approval id is answered or its deadline passes,
	// and returns its final record.
	Wait(ctx context.Context, id string) (Approval, error)
}

// Approval statuses.
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalDenied   = "denied"
	ApprovalTimedOut = "timed_out"
)

// Approval is one parked tool call and its answer, as an [Approver]
// stores it.
type Approval struct {
	ID         string         `json:"id"`
	SessionID  string         `json:"session_id"`
	EnvelopeID string         `json:"envelope_id,omitempty"`
	RunID      string         `json:"run_id"`
	Tool       string         `json:"tool"`
	CallID     string         `json:"call_id,omitempty"`
	Arguments  map[string]any `json:"arguments,omitempty"`
	Reason     string         `json:"reason,omitempty"`
	Default    tools.Action   `json:"default"`
	Created    time.Time      `json:"created"`
	Deadline   time.Time      `json:"deadline"`
	// Status is ApprovalPending until answered or timed out.
	Status string `json:"status"`
	// AnswerReason, By and Answered describe the answer (By is "timeout"
	// for a timeout).
	AnswerReason string    `json:"answer_reason,omitempty"`
	By           string    `json:"by,omitempty"`
	Answered     time.Time `json:"answered,omitzero"`
}

// approve parks call, which a before_tool_call hook asked about with ask,
// on the run's [Approver] and returns the decision that applies once it
// is answered: nil (run the tool) or a deny. It emits ApprovalRequested
// once it recorded the approval (or found the record), and
// ApprovalAnswered or ApprovalTimedOut when it ends. A run without an Approver cannot ask anyone: the call is
// denied.
func (a *Agent) approve(ctx context.Context, r *Run, slot string, call tools.Call, ask *tools.Decision) (*tools.Decision, error) {
	if r.Approvals == nil {
		return tools.Deny("Tool '" + call.Tool + "' needs approval (" + ask.Message + "), and this run cannot ask for it."), nil
	}
	turn := r.Answers.EnvelopeID
	if turn == "" {
		turn = r.RunID
	}
	now := time.Now().UTC()
	timeout := time.Duration(ask.TimeoutMS) * time.Millisecond
	rec, _, err := r.Approvals.Request(ctx, Approval{
		ID: events.ApprovalID(turn, r.SessionID, slot), SessionID: r.SessionID, EnvelopeID: r.Answers.EnvelopeID, RunID: r.RunID,
		Tool: call.Tool, CallID: call.CallID, Arguments: call.Arguments, Reason: ask.Message, Default: ask.Default,
		Created: now, Deadline: now.Add(timeout), Status: ApprovalPending,
	})
	if err != nil {
		return nil, err
	}
	// Every run that parks the call records the request it waits on: a
	// redelivered turn that found the record emits it again, same id.
	if _, err := events.Emit(ctx, r.Bus, &events.ApprovalRequested{Meta: r.meta(), ID: rec.ID, Call: call, Reason: rec.Reason,
		Timeout: rec.Deadline.Sub(rec.Created), Deadline: rec.Deadline, Default: rec.Default, EnvelopeID: rec.EnvelopeID}); err != nil {
		return nil, err
	}
	if rec.Status == ApprovalPending {
		if rec, err = r.Approvals.Wait(ctx, rec.ID); err != nil {
			return nil, err
		}
	}
	var ev events.Event
	var dec *tools.Decision
	switch rec.Status {
	case ApprovalApproved:
		ev = &events.ApprovalAnswered{Meta: r.meta(), ID: rec.ID, Call: call, Decision: events.ApprovalApprove, Reason: rec.AnswerReason, By: rec.By, At: rec.Answered}
	case ApprovalDenied:
		msg := "Tool '" + call.Tool + "' call denied by " + rec.By
		if rec.AnswerReason != "" {
			msg += ": " + rec.AnswerReason
		}
		ev, dec = &events.ApprovalAnswered{Meta: r.meta(), ID: rec.ID, Call: call, Decision: events.ApprovalDeny, Reason: rec.AnswerReason, By: rec.By, At: rec.Answered}, tools.Deny(msg+".")
	default: // timed out
		ev = &events.ApprovalTimedOut{Meta: r.meta(), ID: rec.ID, Call: call, Default: rec.Default, Deadline: rec.Deadline}
		if rec.Default != tools.ActionProceed {
			dec = tools.Deny("Tool '" + call.Tool + "' call was not approved before its deadline; denied by default.")
		}
	}
	if _, err := events.Emit(ctx, r.Bus, ev); err != nil {
		return nil, err
	}
	return dec, nil
}
