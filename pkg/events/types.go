package events

import "strings"

// CloudEvent types. Each is an explicit, versioned constant; a change to a
// payload that breaks a consumer needs a new version. The payload (data)
// type of each is declared in payloads.go; its JSON Schema and a golden
// example live in docs/events/.
const (
	TypeEnvelopeInbound  = "dev.bub.envelope.inbound.v1"
	TypeEnvelopeOutbound = "dev.bub.envelope.outbound.v1"

	TypeRunStarted      = "dev.bub.run.started.v1"
	TypeRunFinished     = "dev.bub.run.finished.v1"
	TypeStepStarted     = "dev.bub.step.started.v1"
	TypeStepFinished    = "dev.bub.step.finished.v1"
	TypeMessagesPending = "dev.bub.messages.pending.v1"
	TypeLLMCallStarted  = "dev.bub.llm_call.started.v1"
	TypeLLMCallFinished = "dev.bub.llm_call.finished.v1"
	TypeToolCallStarted = "dev.bub.tool_call.started.v1"
	TypeToolCallFinish  = "dev.bub.tool_call.finished.v1"
	TypeChatFinished    = "dev.bub.chat.finished.v1"
	TypeCommandFinished = "dev.bub.command.finished.v1"

	TypeCommandChanged = "dev.bub.command.changed.v1"
	TypeWorkChanged    = "dev.bub.work.changed.v1"
	TypePromptChanged  = "dev.bub.prompt.changed.v1"

	TypeHookDecision = "dev.bub.hook.decision.v1"

	TypeApprovalRequested = "dev.bub.approval.requested.v1"
	TypeApprovalAnswered  = "dev.bub.approval.answered.v1"
	TypeApprovalTimedOut  = "dev.bub.approval.timed_out.v1"
	TypeTapeEvent         = "dev.bub.tape.event.v1"
	TypeTurnError         = "dev.bub.turn.error.v1"
	TypeTurnDropped       = "dev.bub.turn.dropped.v1"
	TypeTapeStale         = "dev.bub.tape.stale.v1"
	TypeDeadLetter        = "dev.bub.dead_letter.v1"

	// TypeTapeEntry is the type of every message of a tape's subject in
	// the tapes stream (bub.tape.<session-token>): a stored tape entry, whose data is the
	// entry (tape.Entry). Package tape writes and reads it
	// (tape.EntryEventType); it is not a lifecycle event, so it is not
	// among [Types] and has no Go payload of this package.
	TypeTapeEntry = "dev.bub.tape.entry.v1"
	// TypeTapeIndex is the type of the messages of a tape's index subject
	// (bub.tape-index.<session-token>) in the tapes stream, whose data is
	// the tape's index (tape.IndexEventType); like [TypeTapeEntry], not a
	// lifecycle event.
	TypeTapeIndex = "dev.bub.tape.index.v1"
)

const typePrefix = "dev.bub."

// SubjectName returns the dotted event name used as the last tokens of a
// lifecycle event subject, e.g. "tool_call.started" for
// "dev.bub.tool_call.started.v1". It is the type without its "dev.bub."
// prefix and version suffix.
func SubjectName(ceType string) string {
	s := strings.TrimPrefix(ceType, typePrefix)
	if i := strings.LastIndex(s, ".v"); i > 0 {
		s = s[:i]
	}
	return s
}
