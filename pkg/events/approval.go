package events

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/bubbus/bub/pkg/tools"
)

// The approval events of a tool call a before_tool_call hook asked a
// person about (tools.Ask). The agent emits them on the run's bus; the
// recorder writes each as a tape entry (docs/hooks.md, "Approvals").

// Answers of an approval ([ApprovalAnswered.Decision]).
const (
	ApprovalApprove = "approve"
	ApprovalDeny    = "deny"
)

// ApprovalRequested is emitted when an ask parks a tool call, once its
// durable record exists; a redelivered turn that finds the record emits
// it again with the same ID (a consumer that shows pending approvals
// keys them by ID). Handlers observe it.
type ApprovalRequested struct {
	Meta
	// ID names the approval: the id an answer gives.
	ID string
	// Call is the parked call.
	Call tools.Call
	// Reason is the ask's reason, shown to the person asked.
	Reason string
	// Timeout is how long the ask waits; Deadline is when it ends.
	Timeout  time.Duration
	Deadline time.Time
	// Default is what happens at the deadline: proceed or deny.
	Default tools.Action
	// EnvelopeID is the inbound envelope whose turn is parked.
	EnvelopeID string
}

// ApprovalAnswered is emitted when a person answered an approval, before
// the call runs (approve) or fails with their reason (deny). Handlers
// observe it.
type ApprovalAnswered struct {
	Meta
	ID   string
	Call tools.Call
	// Decision is ApprovalApprove or ApprovalDeny.
	Decision string
	// Reason is the answer's reason, "" for none.
	Reason string
	// By names who answered (the answer's channel: http, nats, cli).
	By string
	// At is when the answer was recorded.
	At time.Time
}

// ApprovalTimedOut is emitted when nobody answered an approval before
// its deadline, and its default applies. It is not a person's answer.
// Handlers observe it.
type ApprovalTimedOut struct {
	Meta
	ID   string
	Call tools.Call
	// Default is the action that applied: proceed or deny.
	Default  tools.Action
	Deadline time.Time
}

// ApprovalID returns the id of the n-th ask (slot) of the turn of
// envelope envelopeID in session: the same for every delivery of the
// turn, so a redelivered turn finds the approval its first delivery
// asked for. It is 32 hex digits, safe as a KV key and a URL segment.
func ApprovalID(envelopeID, session, slot string) string {
	h := sha256.Sum256([]byte(envelopeID + "\x00" + session + "\x00" + slot))
	return hex.EncodeToString(h[:16])
}

// ApprovalRequestedData is the payload of [TypeApprovalRequested].
type ApprovalRequestedData struct {
	ID         string         `json:"id"`
	Tool       string         `json:"tool"`
	CallID     string         `json:"call_id,omitempty"`
	Arguments  map[string]any `json:"arguments,omitempty"`
	Reason     string         `json:"reason,omitempty"`
	TimeoutMS  int64          `json:"timeout_ms"`
	Deadline   string         `json:"deadline"`
	Default    tools.Action   `json:"default"`
	EnvelopeID string         `json:"envelope_id,omitempty"`
}

// ApprovalAnsweredData is the payload of [TypeApprovalAnswered].
type ApprovalAnsweredData struct {
	ID       string `json:"id"`
	Tool     string `json:"tool"`
	CallID   string `json:"call_id,omitempty"`
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
	By       string `json:"by"`
	At       string `json:"at"`
}

// ApprovalTimedOutData is the payload of [TypeApprovalTimedOut].
type ApprovalTimedOutData struct {
	ID       string       `json:"id"`
	Tool     string       `json:"tool"`
	CallID   string       `json:"call_id,omitempty"`
	Default  tools.Action `json:"default"`
	Deadline string       `json:"deadline"`
}

func (e *ApprovalRequested) wire(bool) (string, any) {
	return TypeApprovalRequested, ApprovalRequestedData{
		ID: e.ID, Tool: e.Call.Tool, CallID: e.Call.CallID, Arguments: e.Call.Arguments, Reason: e.Reason,
		TimeoutMS: e.Timeout.Milliseconds(), Deadline: stamp(e.Deadline), Default: e.Default, EnvelopeID: e.EnvelopeID,
	}
}

func (e *ApprovalAnswered) wire(bool) (string, any) {
	return TypeApprovalAnswered, ApprovalAnsweredData{
		ID: e.ID, Tool: e.Call.Tool, CallID: e.Call.CallID, Decision: e.Decision, Reason: e.Reason, By: e.By, At: stamp(e.At),
	}
}

func (e *ApprovalTimedOut) wire(bool) (string, any) {
	return TypeApprovalTimedOut, ApprovalTimedOutData{
		ID: e.ID, Tool: e.Call.Tool, CallID: e.Call.CallID, Default: e.Default, Deadline: stamp(e.Deadline),
	}
}

// stamp formats t as the payloads' RFC 3339 times, in UTC with
// milliseconds.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }
