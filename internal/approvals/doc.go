// Package approvals is the durable store of the tool calls a
// before_tool_call hook asked a person about (tools.Ask): the KV bucket
// <prefix>_approvals, one key per approval id, whose value is the
// [agent.Approval] record — the parked call, its reason, deadline and
// default, and once it ended its answer or timeout.
//
// The record is the truth every party meets on. The worker running the
// turn creates it ([Store.Request]) and waits for it to change
// ([Store.Wait]); an answer — HTTP POST /v1/approvals/{id}, a NATS
// request on bub.approval.answer, `bub approve` / `bub deny` — moves it
// from pending to approved or denied with a compare-and-set
// ([Store.Answer]), so exactly one answer wins and a second one is refused
// with [ErrAnswered]. At the deadline whoever looks first (the waiting
// worker, or a late answer) moves it to timed_out and the ask's default
// applies. A worker killed while it waits loses nothing: its turn's
// inbound message is redelivered, the new delivery asks for the same
// approval id (events.ApprovalID), finds the record and its answer, and
// completes the turn.
package approvals
