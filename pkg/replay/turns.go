package replay

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tape"
)

// Turn is one recorded agent run of a tape: the entries of one run id,
// from its loop.start on.
type Turn struct {
	// RunID is the recorded run's id.
	RunID string
	// Context are the tape's entries before the run's first one: the
	// history the run read.
	Context []tape.Entry
	// Entries are the run's own entries, in tape order.
	Entries []tape.Entry
	// Prompt, Model, AllowedTools and AllowedSkills are what loop.start
	// recorded.
	Prompt        llm.Content
	Model         string
	AllowedTools  []string
	AllowedSkills []string
}

// Turns returns the agent runs of a tape's entries, in the order they
// started. Entries without a run id (anchors, handoffs of `bub tape`) are
// context only; a run without loop.start (a comma command) is not a turn
// the model answered and is left out.
func Turns(entries []tape.Entry) ([]Turn, error) {
	var out []Turn
	index := map[string]int{} // run id → its turn in out
	for i, e := range entries {
		run, _ := e.Meta["run_id"].(string)
		if run == "" {
			continue
		}
		if n, ok := index[run]; ok {
			out[n].Entries = append(out[n].Entries, e)
			continue
		}
		name, data := event(e)
		if name != "loop.start" {
			continue
		}
		t := Turn{RunID: run, Context: entries[:i:i], Entries: []tape.Entry{e}}
		t.Model, _ = data["model"].(string)
		if err := remarshal(data["prompt"], &t.Prompt); err != nil {
			return nil, fmt.Errorf("replay: run %s: loop.start prompt: %w", run, err)
		}
		if err := remarshal(data["allowed_tools"], &t.AllowedTools); err != nil {
			return nil, fmt.Errorf("replay: run %s: loop.start allowed_tools: %w", run, err)
		}
		if err := remarshal(data["allowed_skills"], &t.AllowedSkills); err != nil {
			return nil, fmt.Errorf("replay: run %s: loop.start allowed_skills: %w", run, err)
		}
		index[run] = len(out)
		out = append(out, t)
	}
	return out, nil
}

// step is what one recorded step answered: the model's tool calls and
// text (its error, when the call failed), and the tools' results.
type step struct {
	calls   []llm.ToolCall
	results []any
	text    string
	err     *bub.Error
	usage   *llm.Usage
}

// steps returns the model answers and tool results a run's entries hold,
// by step number.
func steps(entries []tape.Entry) (map[int]*step, error) {
	out := map[int]*step{}
	cur := &step{}
	for _, e := range entries {
		switch e.Kind {
		case tape.KindEvent:
			name, data := event(e)
			switch name {
			case "loop.step.start":
				n, _ := data["step"].(float64)
				cur = &step{}
				out[int(n)] = cur
			case "run":
				if err := remarshal(data["usage"], &cur.usage); err != nil {
					return nil, fmt.Errorf("replay: usage: %w", err)
				}
			}
		case tape.KindToolCall:
			if err := remarshal(e.Payload["calls"], &cur.calls); err != nil {
				return nil, fmt.Errorf("replay: entry %d: tool calls: %w", e.ID, err)
			}
		case tape.KindToolResult:
			cur.results, _ = e.Payload["results"].([]any)
		case tape.KindError:
			kind, _ := e.Payload["kind"].(string)
			message, _ := e.Payload["message"].(string)
			cur.err = &bub.Error{Kind: bub.Kind(kind), Message: message}
		case tape.KindMessage:
			text, ok, err := assistantText(e)
			if err != nil {
				return nil, fmt.Errorf("replay: entry %d: message: %w", e.ID, err)
			}
			if ok {
				cur.text = text
			}
		}
	}
	return out, nil
}

// Sections of a turn's rendering: what [Result] compares.
const (
	SectionOutbound  = "outbound"
	SectionTools     = "tool calls"
	SectionDecisions = "hook decisions"
)

// Line is one line of a turn's rendering, in a section.
type Line struct {
	Section string
	Text    string
}

// Lines renders a run's entries for comparison: the outbound text and
// the run's and steps' statuses (outbound), each tool call with its
// arguments and each result (tool calls), and each hook decision and
// approval (hook decisions, sorted within a step: the calls of one step
// run concurrently). Ids, times, durations and usage are left out: they
// differ between any two runs.
func Lines(entries []tape.Entry) []Line {
	var out, decisions []Line
	var texts []string
	n := 0
	flush := func() {
		slices.SortFunc(decisions, func(a, b Line) int { return strings.Compare(a.Text, b.Text) })
		out = append(out, decisions...)
		decisions = decisions[:0]
	}
	add := func(section, format string, args ...any) {
		out = append(out, Line{section, fmt.Sprintf("step %d ", n) + fmt.Sprintf(format, args...)})
	}
	for _, e := range entries {
		switch e.Kind {
		case tape.KindEvent:
			name, data := event(e)
			switch name {
			case "loop.step.start":
				flush()
				f, _ := data["step"].(float64)
				n = int(f)
			case "loop.step":
				flush()
				add(SectionOutbound, "status %v%s", data["status"], errorSuffix(data["error"]))
			case "loop.finish":
				flush()
				out = append(out, Line{SectionOutbound, fmt.Sprintf("run status %v%s", data["status"], errorSuffix(data["error"]))})
			case "hook.decision":
				decisions = append(decisions, Line{SectionDecisions, fmt.Sprintf("step %d %v %v %v %s%s", n, data["hook"], data["plugin"], data["action"], compact(data["detail"]), errorSuffix(data["error"]))})
			case "approval.requested":
				decisions = append(decisions, Line{SectionDecisions, fmt.Sprintf("step %d approval requested for %v: %v (default %v)", n, data["tool"], data["reason"], data["default"])})
			case "approval.answered":
				decisions = append(decisions, Line{SectionDecisions, fmt.Sprintf("step %d approval %v for %v: %v", n, data["decision"], data["tool"], data["reason"])})
			case "approval.timed_out":
				decisions = append(decisions, Line{SectionDecisions, fmt.Sprintf("step %d approval timed out for %v (default %v)", n, data["tool"], data["default"])})
			}
		case tape.KindToolCall:
			calls, _ := e.Payload["calls"].([]any)
			for _, c := range calls {
				m, _ := c.(map[string]any)
				fn, _ := m["function"].(map[string]any)
				add(SectionTools, "call %v %s", fn["name"], canonicalArgs(fn["arguments"]))
			}
		case tape.KindToolResult:
			results, _ := e.Payload["results"].([]any)
			for i, r := range results {
				add(SectionTools, "result %d %s", i+1, compact(r))
			}
		case tape.KindError:
			add(SectionOutbound, "error %v: %v", e.Payload["kind"], e.Payload["message"])
		case tape.KindMessage:
			if text, ok, err := assistantText(e); ok && err == nil {
				texts = append(texts, text)
			}
		}
	}
	flush()
	return append(out, Line{SectionOutbound, "outbound " + compact(strings.Join(texts, ""))})
}

// assistantText returns the plain text of an assistant message entry; ok
// is false for any other message.
func assistantText(e tape.Entry) (text string, ok bool, err error) {
	if e.Payload["role"] != string(llm.RoleAssistant) {
		return "", false, nil
	}
	var m llm.Message
	if err := remarshal(e.Payload, &m); err != nil {
		return "", false, err
	}
	return m.Content.PlainText(), true, nil
}

// event returns the name and data of an event entry ("" for another kind).
func event(e tape.Entry) (string, map[string]any) {
	if e.Kind != tape.KindEvent {
		return "", nil
	}
	name, _ := e.Payload["name"].(string)
	data, _ := e.Payload["data"].(map[string]any)
	return name, data
}

func errorSuffix(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprintf(" (error: %v)", v)
}

// canonicalArgs renders a call's JSON arguments with sorted keys, as
// recorded when they are not JSON.
func canonicalArgs(v any) string {
	s, ok := v.(string)
	if !ok {
		return compact(v)
	}
	var parsed any
	if json.Unmarshal([]byte(s), &parsed) != nil {
		return s
	}
	return compact(parsed)
}

// compact is v as JSON (map keys sorted).
func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// remarshal decodes the JSON value v (as a tape holds it) into out; nil
// leaves out as it is.
func remarshal(v, out any) error {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}
