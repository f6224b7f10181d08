package llm

import (
	"reflect"
	"slices"
	"strings"
)

// SystemPrompt returns the system prompt of the request: the plain text
// of its leading system messages, joined with blank lines ("" when the
// first message is not a system message).
func (r Request) SystemPrompt() string {
	n := r.systemCount()
	texts := make([]string, n)
	for i, m := range r.Messages[:n] {
		texts[i] = m.Content.PlainText()
	}
	return strings.Join(texts, "\n\n")
}

// Conversation returns the messages after the leading system messages.
func (r Request) Conversation() []Message { return r.Messages[r.systemCount():] }

func (r Request) systemCount() int {
	n := 0
	for n < len(r.Messages) && r.Messages[n].Role == RoleSystem {
		n++
	}
	return n
}

// Changes describes what turned request before into after, one key per
// field that differs (an empty map when nothing does):
//
//   - "model", "max_tokens": {"before": old, "after": new};
//   - "system_prompt": {"before_len": n, "after_len": m}, lengths in bytes
//     of [Request.SystemPrompt] (the full text is large and is recorded
//     with the call itself);
//   - "messages": {"before_count": n, "after_count": m, "changed": [i…]},
//     the [Request.Conversation] lengths and the indices below both whose
//     message differs;
//   - "tool_names": {"removed": [...], "added": [...]};
//   - "run_id": {"before": old, "after": new}.
func Changes(before, after Request) map[string]any {
	out := map[string]any{}
	pair := func(key string, b, a any) {
		if b != a {
			out[key] = map[string]any{"before": b, "after": a}
		}
	}
	pair("run_id", before.RunID, after.RunID)
	pair("model", before.Model, after.Model)
	pair("max_tokens", before.MaxTokens, after.MaxTokens)
	if bs, as := before.SystemPrompt(), after.SystemPrompt(); bs != as {
		out["system_prompt"] = map[string]any{"before_len": len(bs), "after_len": len(as)}
	}
	bm, am := before.Conversation(), after.Conversation()
	changed := []int{}
	for i := range min(len(bm), len(am)) {
		if !reflect.DeepEqual(bm[i], am[i]) {
			changed = append(changed, i)
		}
	}
	if len(changed) > 0 || len(bm) != len(am) {
		out["messages"] = map[string]any{"before_count": len(bm), "after_count": len(am), "changed": changed}
	}
	removed, added := []string{}, []string{}
	for _, n := range before.ToolNames {
		if !slices.Contains(after.ToolNames, n) {
			removed = append(removed, n)
		}
	}
	for _, n := range after.ToolNames {
		if !slices.Contains(before.ToolNames, n) {
			added = append(added, n)
		}
	}
	if len(removed) > 0 || len(added) > 0 {
		out["tool_names"] = map[string]any{"removed": removed, "added": added}
	}
	return out
}
