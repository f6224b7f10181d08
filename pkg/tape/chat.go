package tape

import (
	"time"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/llm"
)

// ChatRecord is one model interaction to record (the arguments of Bub's
// record_chat). The worker's fork and the recorder both turn it into
// entries with [ChatEntries], so they agree on what a run leaves on the tape.
type ChatRecord struct {
	RunID        string
	SystemPrompt string
	// ContextError is the error that prevented reading the context.
	ContextError *bub.Error
	NewMessages  []llm.Message
	ToolCalls    []llm.ToolCall
	// ToolResults nil means no results; an empty non-nil slice is recorded.
	ToolResults []any
	// Error is recorded unless it is the very same value as ContextError.
	Error *bub.Error
	// ResponseText nil means no assistant message ("" is recorded).
	ResponseText *string
	Provider     string
	Model        string
	Usage        *llm.Usage
	// Date stamps every entry; the zero time means now. The recorder passes
	// the event time so that a redelivered event yields the same entries.
	Date time.Time
}

// ChatEntries returns the entries of rec in record_chat's order, each with
// meta {run_id}: system (when the prompt is not empty), the context error,
// one message per new message, tool_call (when there are calls),
// tool_result (when results are not nil), the error, the assistant message,
// and last the event run {status: "error"|"ok", usage?, provider?, model?}.
func ChatEntries(rec ChatRecord) []Entry {
	meta := map[string]any{"run_id": rec.RunID}
	var out []Entry
	if rec.SystemPrompt != "" {
		out = append(out, System(rec.SystemPrompt, meta))
	}
	if rec.ContextError != nil {
		out = append(out, ErrorEntry(rec.ContextError, meta))
	}
	for _, m := range rec.NewMessages {
		out = append(out, MessageEntry(m, meta))
	}
	if len(rec.ToolCalls) > 0 {
		out = append(out, ToolCalls(rec.ToolCalls, meta))
	}
	if rec.ToolResults != nil {
		out = append(out, ToolResults(rec.ToolResults, meta))
	}
	if rec.Error != nil && rec.Error != rec.ContextError {
		out = append(out, ErrorEntry(rec.Error, meta))
	}
	if rec.ResponseText != nil {
		out = append(out, MessageEntry(llm.Message{Role: llm.RoleAssistant, Content: llm.Text(*rec.ResponseText)}, meta))
	}
	data := map[string]any{"status": "ok"}
	if rec.Error != nil {
		data["status"] = "error"
	}
	if rec.Usage != nil {
		data["usage"] = toMap(rec.Usage)
	}
	if rec.Provider != "" {
		data["provider"] = rec.Provider
	}
	if rec.Model != "" {
		data["model"] = rec.Model
	}
	out = append(out, Event("run", data, meta))
	if !rec.Date.IsZero() {
		date := FormatDate(rec.Date)
		for i := range out {
			out[i].Date = date
		}
	}
	return out
}
