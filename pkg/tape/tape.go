package tape

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/llm"
)

// ContextAnchor says where a model context starts (Bub's TapeContext
// anchor). The zero value is [FromLastAnchor].
type ContextAnchor struct {
	whole bool
	name  string
	named bool
}

// FromLastAnchor starts the context after the last anchor (Bub's
// LAST_ANCHOR, the default). A tape without anchors then fails to read with
// "No anchors found in tape.", which [Tape.EnsureBootstrapAnchor] prevents.
func FromLastAnchor() ContextAnchor { return ContextAnchor{} }

// FromStart uses the whole tape (Bub's anchor None).
func FromStart() ContextAnchor { return ContextAnchor{whole: true} }

// FromAnchor starts the context after the last anchor named name; an empty
// name means the whole tape, as in Bub.
func FromAnchor(name string) ContextAnchor { return ContextAnchor{name: name, named: true} }

// Selector turns the entries of a context into chat messages (Bub's
// TapeContext.select). Entries with meta context:false never reach it.
type Selector func(ctx context.Context, entries []Entry, c Context) ([]llm.Message, error)

// Context decides what [Tape.ReadMessages] gives the model (Bub's
// TapeContext). The zero value is Bub's default: after the last anchor,
// with [DefaultSelector].
type Context struct {
	Anchor ContextAnchor
	// Select builds the messages; nil means DefaultSelector.
	Select Selector
	// State is the turn state, for selectors that need it.
	State *bub.State
}

// Query returns the query that selects the context's entries (Bub's
// build_query). The anchor entry itself is not part of the slice.
func (c Context) Query() Query {
	switch {
	case c.Anchor.whole:
		return All()
	case c.Anchor.named:
		return All().AfterAnchor(c.Anchor.name)
	}
	return All().LastAnchor()
}

// DefaultSelector is Bub's builtin selector (default_tape_context). Walking
// the entries in order, an anchor becomes an assistant message
// "[Anchor created: <name>]: <state JSON>", a message entry is copied, a
// tool_call entry with calls becomes an assistant message carrying them
// (and makes them pending), and a tool_result entry becomes one tool
// message per result (strings as they are, other values as JSON) whose
// tool_call_id and name come from the pending call at the same position;
// pending calls are then cleared. Other kinds are ignored.
func DefaultSelector(ctx context.Context, entries []Entry, c Context) ([]llm.Message, error) {
	var msgs []llm.Message
	var pending []llm.ToolCall
	for _, e := range entries {
		switch e.Kind {
		case KindAnchor:
			content := fmt.Sprintf("[Anchor created: %s]: %s", pyStr(e.Payload["name"]), pyJSON(e.Payload["state"]))
			msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: llm.Text(content)})
		case KindMessage:
			msgs = append(msgs, messageOf(e.Payload))
		case KindToolCall:
			pending = toolCallsOf(e.Payload["calls"])
			if len(pending) > 0 {
				msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: llm.Text(""), ToolCalls: pending})
			}
		case KindToolResult:
			results, _ := e.Payload["results"].([]any)
			for i, r := range results {
				text, ok := r.(string)
				if !ok {
					text = pyJSON(r)
				}
				m := llm.Message{Role: llm.RoleTool, Content: llm.Text(text)}
				if i < len(pending) {
					m.ToolCallID, m.Name = pending[i].ID, pending[i].Function.Name
				}
				msgs = append(msgs, m)
			}
			pending = nil
		}
	}
	return msgs, nil
}

// pyStr renders a value as Python's str() does for JSON values.
func pyStr(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case nil:
		return "None"
	case bool:
		if v {
			return "True"
		}
		return "False"
	}
	return pyJSON(v)
}

// messageOf converts a message payload into a chat message. A payload the
// message type cannot hold keeps its role and the JSON of its content.
func messageOf(payload map[string]any) llm.Message {
	if m, ok := plainMessageOf(payload); ok {
		return m
	}
	var m llm.Message
	if b, err := json.Marshal(payload); err == nil && json.Unmarshal(b, &m) == nil {
		return m
	}
	role, _ := payload["role"].(string)
	text, ok := payload["content"].(string)
	if !ok {
		text = pyStr(payload["content"])
	}
	return llm.Message{Role: role, Content: llm.Text(text)}
}

// plainMessageOf is messageOf without a JSON round trip for the payloads
// most messages have: only the keys role, content, tool_call_id and name,
// each a valid UTF-8 string (content may also be null). It returns what
// the round trip would; ok is false for any other payload.
func plainMessageOf(payload map[string]any) (m llm.Message, ok bool) {
	for k, v := range payload {
		var field *string
		switch k {
		case "role":
			field = &m.Role
		case "content":
			if v == nil {
				continue
			}
			field = &m.Content.Text
		case "tool_call_id":
			field = &m.ToolCallID
		case "name":
			field = &m.Name
		default:
			return llm.Message{}, false
		}
		str, isStr := v.(string)
		if !isStr || !utf8.ValidString(str) {
			return llm.Message{}, false
		}
		*field = str
	}
	return m, true
}

// toolCallsOf converts serialized tool calls, skipping non-objects. Every
// object gives one call, whatever its fields hold, so result i stays
// paired with call i (Bub keeps every object): a field of the wrong type
// is left empty, and arguments that are not a string are their JSON text.
func toolCallsOf(v any) []llm.ToolCall {
	list, _ := v.([]any)
	var calls []llm.ToolCall
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		var c llm.ToolCall
		c.ID, _ = m["id"].(string)
		c.Type, _ = m["type"].(string)
		fn, _ := m["function"].(map[string]any)
		c.Function.Name, _ = fn["name"].(string)
		switch args := fn["arguments"].(type) {
		case string:
			c.Function.Arguments = args
		case nil:
		default:
			if b, err := json.Marshal(args); err == nil {
				c.Function.Arguments = string(b)
			}
		}
		calls = append(calls, c)
	}
	return calls
}

// Tape is a handle on one named tape of a store with the context its
// readers use (Bub's Tape). It is a small immutable value; tools and the
// agent loop receive it. Bind it to a [Fork] to run a turn.
type Tape struct {
	store Store
	name  string
	ctx   Context
}

// New returns the tape name of store, read through c.
func New(store Store, name string, c Context) Tape {
	return Tape{store: store, name: name, ctx: c}
}

// Name returns the tape's name.
func (t Tape) Name() string { return t.name }

// Store returns the store the tape lives in.
func (t Tape) Store() Store { return t.store }

// Context returns the tape's context.
func (t Tape) Context() Context { return t.ctx }

// WithContext returns a copy of t read through c.
func (t Tape) WithContext(c Context) Tape {
	t.ctx = c
	return t
}

// Append appends entries as one batch and returns them as stored.
func (t Tape) Append(ctx context.Context, entries ...Entry) ([]Entry, error) {
	return t.store.Append(ctx, t.name, entries)
}

// AppendEvent appends an event {name, data} (Bub's append_event, which
// always records data: nil becomes {}).
func (t Tape) AppendEvent(ctx context.Context, name string, data map[string]any, meta ...map[string]any) (Entry, error) {
	if data == nil {
		data = map[string]any{}
	}
	stored, err := t.Append(ctx, Event(name, data, meta...))
	if err != nil {
		return Entry{}, err
	}
	return stored[0], nil
}

// HandoffEntries returns the entries of a handoff: the anchor, then the event
// "handoff" {name, state}, both with the same meta.
func HandoffEntries(name string, state map[string]any, meta []map[string]any) []Entry {
	data := map[string]any{"name": name, "state": state}
	if state == nil {
		data["state"] = map[string]any{}
	}
	return []Entry{Anchor(name, state, meta...), Event("handoff", data, meta...)}
}

// Handoff appends an anchor name (with state when not nil) and a "handoff"
// event in one batch, and returns both (Bub's handoff). Under the default
// context the next read starts after this anchor.
func (t Tape) Handoff(ctx context.Context, name string, state map[string]any, meta ...map[string]any) ([]Entry, error) {
	return t.store.Append(ctx, t.name, HandoffEntries(name, state, meta))
}

// BootstrapAnchor is the anchor a tape starts from: handed off, with
// [BootstrapState], when a tape has none ([Tape.EnsureBootstrapAnchor])
// and after every reset.
const BootstrapAnchor = "session/start"

// BootstrapState returns the state of a new [BootstrapAnchor] handoff:
// {owner: human}.
func BootstrapState() map[string]any { return map[string]any{"owner": "human"} }

// EnsureBootstrapAnchor hands off [BootstrapAnchor] {owner: human} when the
// tape has no anchor. It reads only the index.
func (t Tape) EnsureBootstrapAnchor(ctx context.Context) error {
	ix, err := t.store.Index(ctx, t.name)
	if err != nil {
		return err
	}
	if ix.Anchors > 0 {
		return nil
	}
	_, err = t.Handoff(ctx, BootstrapAnchor, BootstrapState())
	return err
}

// Reset empties the tape (Bub's reset). With archive it first copies the
// current entries through the store's [Archiver] and returns
// "Archived: <location>", else "ok". The reset and the new
// [BootstrapAnchor] handoff (state {owner: human, archived?: location}) are
// one atomic batch.
func (t Tape) Reset(ctx context.Context, archive bool) (string, error) {
	state := BootstrapState()
	result := "ok"
	if archive {
		a, err := archiverOf(t.store)
		if err != nil {
			return "", err
		}
		entries, err := t.store.Fetch(ctx, t.name, All())
		if err != nil {
			return "", err
		}
		loc, err := a.Archive(ctx, t.name, entries)
		if err != nil {
			return "", err
		}
		state["archived"] = loc
		result = "Archived: " + loc
	}
	if _, err := t.store.Append(ctx, t.name, HandoffEntries(BootstrapAnchor, state, nil), WithReset()); err != nil {
		return "", err
	}
	return result, nil
}

// ReadMessages returns the model context: the entries the context's query
// selects, without those whose meta has context:false, turned into
// messages by the context's selector. With the default selector, which
// keeps no part of the entries it reads, a store that can lends its
// entries instead of copies (see readOptions).
func (t Tape) ReadMessages(ctx context.Context) ([]llm.Message, error) {
	var entries []Entry
	var err error
	if s, ok := t.store.(fetcher); ok && t.ctx.Select == nil {
		entries, err = s.fetchWith(ctx, t.name, t.ctx.Query(), readOptions{shared: true})
	} else {
		entries, err = t.store.Fetch(ctx, t.name, t.ctx.Query())
	}
	if err != nil {
		return nil, err
	}
	entries = slices.DeleteFunc(entries, func(e Entry) bool { return !e.InContext() })
	sel := t.ctx.Select
	if sel == nil {
		sel = DefaultSelector
	}
	return sel(ctx, entries, t.ctx)
}

// Info summarizes a tape (Bub's TapeInfo).
type Info struct {
	Name                   string
	Entries                int64
	Anchors                int64
	LastAnchor             string // "" when the tape has no anchor
	EntriesSinceLastAnchor int64
	// LastTokenUsage is total_tokens of the newest run event that has an
	// integer one; nil when none has.
	LastTokenUsage *int64
	// LastTokenCacheHitRate is cached_tokens / prompt_tokens of that run
	// event's usage, nil unless prompt_tokens is a positive integer and
	// cached_tokens an integer.
	LastTokenCacheHitRate *float64
}

// String renders the seven lines of the tape.info tool.
func (i Info) String() string {
	orNone := func(s string, ok bool) string {
		if !ok {
			return "None"
		}
		return s
	}
	var usage, rate string
	if i.LastTokenUsage != nil {
		usage = fmt.Sprint(*i.LastTokenUsage)
	}
	if i.LastTokenCacheHitRate != nil {
		rate = fmt.Sprintf("%.2f%%", *i.LastTokenCacheHitRate*100)
	}
	return fmt.Sprintf("name: %s\nentries: %d\nanchors: %d\nlast_anchor: %s\nentries_since_last_anchor: %d\nlast_token_usage: %s\nlast_token_cache_hit_rate: %s",
		i.Name, i.Entries, i.Anchors, orNone(i.LastAnchor, i.LastAnchor != ""), i.EntriesSinceLastAnchor,
		orNone(usage, i.LastTokenUsage != nil), orNone(rate, i.LastTokenCacheHitRate != nil))
}

// Info returns the tape's summary. Counts come from the index; the token
// usage is looked for among the events since the last anchor first and in
// the whole tape only when none of those has one.
func (t Tape) Info(ctx context.Context) (Info, error) {
	ix, err := t.store.Index(ctx, t.name)
	if err != nil {
		return Info{}, err
	}
	info := Info{Name: t.name, Entries: ix.Entries, Anchors: ix.Anchors, EntriesSinceLastAnchor: ix.EntriesSinceLastAnchor()}
	queries := []Query{All().Kinds(KindEvent)}
	if a, ok := ix.LastAnchor(); ok {
		info.LastAnchor = a.Name
		queries = slices.Insert(queries, 0, All().LastAnchor().Kinds(KindEvent))
	}
	for _, q := range queries {
		events, err := t.store.Fetch(ctx, t.name, q)
		if err != nil {
			return Info{}, err
		}
		for _, e := range slices.Backward(events) {
			if usage, ok := runUsage(e); ok {
				total, _ := asInt(usage["total_tokens"])
				info.LastTokenUsage = &total
				prompt, okP := asInt(usage["prompt_tokens"])
				details, _ := usage["prompt_tokens_details"].(map[string]any)
				cached, okC := asInt(details["cached_tokens"])
				if okP && okC && prompt > 0 {
					rate := float64(cached) / float64(prompt)
					info.LastTokenCacheHitRate = &rate
				}
				return info, nil
			}
		}
	}
	return info, nil
}

// runUsage returns the usage of a run event whose total_tokens is an
// integer.
func runUsage(e Entry) (map[string]any, bool) {
	if e.Kind != KindEvent || e.Payload["name"] != "run" {
		return nil, false
	}
	data, _ := e.Payload["data"].(map[string]any)
	usage, _ := data["usage"].(map[string]any)
	_, ok := asInt(usage["total_tokens"])
	return usage, ok
}

// asInt returns v as an integer when it is an integral JSON number
// (booleans are not numbers).
func asInt(v any) (int64, bool) {
	f, ok := v.(float64)
	if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

// AnchorSummary is one anchor as tape.anchors lists it.
type AnchorSummary struct {
	Name  string         // "-" when the anchor has no name
	State map[string]any // {} when it has no state
}

// Anchors returns the last limit anchors of the tape, oldest first (Bub's
// anchors; the tools use 20).
func (t Tape) Anchors(ctx context.Context, limit int) ([]AnchorSummary, error) {
	entries, err := t.store.Fetch(ctx, t.name, All().Kinds(KindAnchor))
	if err != nil {
		return nil, err
	}
	entries = entries[pyTail(len(entries), limit):]
	out := make([]AnchorSummary, len(entries))
	for i, e := range entries {
		name := "-"
		if v, ok := e.Payload["name"]; ok {
			name = pyStr(v)
		}
		state, _ := e.Payload["state"].(map[string]any)
		if state == nil {
			state = map[string]any{}
		}
		out[i] = AnchorSummary{Name: name, State: state}
	}
	return out, nil
}

// pyTail is where Python's entries[-limit:] starts in n entries: the
// last limit, all of them for 0, and past the first -limit for a
// negative limit.
func pyTail(n, limit int) int {
	if limit < 0 {
		return min(n, -limit)
	}
	if limit == 0 {
		return 0
	}
	return max(0, n-limit)
}

// Search is a tape.search request.
type Search struct {
	Query string
	// Limit caps the results; 0 means 20.
	Limit int
	// Start and End filter by date when either is set (the other one then
	// being "" makes the search fail, as in Bub).
	Start, End string
	// Kinds defaults to message and tool_result.
	Kinds []string
}

// SearchResult is what tape.search shows: the matching entries, newest
// first, and how many were left out because they hold an earlier search's
// output.
type SearchResult struct {
	Entries  []Entry
	Filtered int
}

// searchMarker marks tape.search output; entries containing it are left
// out of new results.
const searchMarker = "[tape.search]"

// String renders the tape.search tool output: a header line
// "[tape.search]: <n> matches (<filtered> filtered)" and one JSON line
// {"date", "content"} per entry.
func (r SearchResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d matches (%d filtered)", searchMarker, len(r.Entries), r.Filtered)
	for _, e := range r.Entries {
		b.WriteByte('\n')
		b.WriteString(searchLine(e))
	}
	return b.String()
}

func searchLine(e Entry) string {
	b := append([]byte(`{"date": `), appendString(nil, e.Date)...)
	b = append(b, `, "content": `...)
	return string(append(appendJSON(b, e.Payload), '}'))
}

// Search runs a tape.search. An empty query lists the oldest matching
// entries; otherwise the entries whose JSON contains the query are walked
// newest first, deduplicated by payload, kept when their payload contains
// the query (case-insensitive), up to the limit. Bub also keeps fuzzy
// matches (rapidfuzz WRatio >= 80 over token windows); this port does not.
// Entries whose output line would contain "[tape.search]" are counted in
// Filtered instead of returned.
func (t Tape) Search(ctx context.Context, s Search) (SearchResult, error) {
	kinds := s.Kinds
	if kinds == nil {
		kinds = []string{KindMessage, KindToolResult}
	}
	limit := s.Limit
	if limit <= 0 {
		limit = 20
	}
	q := All().Text(s.Query).Kinds(kinds...)
	if s.Start != "" || s.End != "" {
		q = q.BetweenDates(s.Start, s.End)
	}
	var found []Entry
	if s.Query == "" {
		var err error
		if found, err = t.store.Fetch(ctx, t.name, q.Limit(limit)); err != nil {
			return SearchResult{}, err
		}
	} else {
		entries, err := t.store.Fetch(ctx, t.name, q)
		if err != nil {
			return SearchResult{}, err
		}
		needle := strings.ToLower(strings.TrimSpace(s.Query))
		seen := map[string]bool{}
		for _, e := range slices.Backward(entries) {
			if needle == "" || len(found) == limit {
				break
			}
			text := strings.ToLower(pyJSON(e.Payload))
			if seen[text] {
				continue
			}
			seen[text] = true
			if strings.Contains(text, needle) {
				found = append(found, e)
			}
		}
	}
	var r SearchResult
	for _, e := range found {
		if strings.Contains(searchLine(e), searchMarker) {
			r.Filtered++
			continue
		}
		r.Entries = append(r.Entries, e)
	}
	return r, nil
}
