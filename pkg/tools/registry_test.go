package tools_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/bubbus/bub/pkg/tools"
)

func noop(context.Context, *tools.Context, map[string]any) (any, error) { return "ok", nil }

// tool returns a registrable tool with the given name and parameters.
func tool(name string, params map[string]any) tools.Tool {
	return tools.Tool{Name: name, Parameters: params, Handler: noop}
}

func TestRegisterRejects(t *testing.T) {
	tests := []struct {
		name  string
		first *tools.Tool
		tool  tools.Tool
		want  error
		text  string
	}{
		{name: "duplicate runtime name", first: ptr(tool("fs.read", nil)), tool: tool("fs.read", nil), want: tools.ErrDuplicateTool},
		{name: "duplicate model name", first: ptr(tool("fs.read", nil)), tool: tool("fs_read", nil), want: tools.ErrDuplicateTool, text: `model name "fs_read" is used by "fs.read"`},
		{name: "empty name", tool: tool("", nil), want: tools.ErrInvalidTool},
		{name: "space in name", tool: tool("fs read", nil), want: tools.ErrInvalidTool},
		{name: "name too long", tool: tool(strings.Repeat("a", 65), nil), want: tools.ErrInvalidTool},
		{name: "no handler", tool: tools.Tool{Name: "x"}, want: tools.ErrInvalidTool, text: "no handler"},
		{name: "non-object schema", tool: tool("x", map[string]any{"type": "string"}), want: tools.ErrInvalidTool},
		{name: "properties not a map", tool: tool("x", map[string]any{"properties": []any{}}), want: tools.ErrInvalidTool},
		{name: "property not a schema", tool: tool("x", props("a", "string")), want: tools.ErrInvalidTool, text: `property "a" must be an object schema`},
		{name: "unknown type", tool: tool("x", obj(map[string]any{"a": map[string]any{"type": "date"}})), want: tools.ErrInvalidTool, text: `unsupported type "date"`},
		{name: "bad type list", tool: tool("x", obj(map[string]any{"a": map[string]any{"type": []any{1}}})), want: tools.ErrInvalidTool},
		{name: "required unknown", tool: tool("x", map[string]any{"type": "object", "properties": map[string]any{}, "required": []string{"a"}}), want: tools.ErrInvalidTool},
		{name: "required not strings", tool: tool("x", map[string]any{"type": "object", "required": "a"}), want: tools.ErrInvalidTool},
		{name: "items not a schema", tool: tool("x", obj(map[string]any{"a": map[string]any{"type": "array", "items": "string"}})), want: tools.ErrInvalidTool},
		{name: "bad nested items", tool: tool("x", obj(map[string]any{"a": map[string]any{"type": "array", "items": map[string]any{"type": "int"}}})), want: tools.ErrInvalidTool, text: "items"},
		{name: "enum not a list", tool: tool("x", obj(map[string]any{"a": map[string]any{"enum": "a"}})), want: tools.ErrInvalidTool},
		{name: "order names unknown parameter", tool: tools.Tool{Name: "x", Handler: noop, Order: []string{"a"}}, want: tools.ErrInvalidTool},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var reg tools.Registry
			if tt.first != nil {
				if err := reg.Register(*tt.first); err != nil {
					t.Fatalf("first Register: %v", err)
				}
			}
			err := reg.Register(tt.tool)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Register = %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.text) {
				t.Errorf("error %q does not contain %q", err, tt.text)
			}
		})
	}
}

func TestRegisterAcceptsSchemas(t *testing.T) {
	schemas := map[string]map[string]any{
		"nil":         nil,
		"empty":       {},
		"no type":     {"properties": map[string]any{"a": map[string]any{}}},
		"type list":   obj(map[string]any{"a": map[string]any{"type": []any{"string", "null"}}}),
		"nested":      obj(map[string]any{"a": map[string]any{"type": "object", "properties": map[string]any{"b": map[string]any{"type": "integer"}}, "required": []any{"b"}}}),
		"string enum": obj(map[string]any{"a": map[string]any{"type": "string", "enum": []string{"x"}}}),
	}
	for name, schema := range schemas {
		t.Run(name, func(t *testing.T) {
			var reg tools.Registry
			if err := reg.Register(tool("x", schema)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestMustRegisterPanicsOnDuplicate(t *testing.T) {
	var reg tools.Registry
	defer func() {
		if p := recover(); p == nil {
			t.Fatal("MustRegister did not panic")
		}
	}()
	reg.MustRegister(tool("a", nil), tool("a", nil))
}

func TestFreeze(t *testing.T) {
	var reg tools.Registry
	reg.MustRegister(tool("a", nil))
	reg.Freeze()
	if err := reg.Register(tool("b", nil)); !errors.Is(err, tools.ErrRegistryFrozen) {
		t.Fatalf("Register after Freeze = %v", err)
	}
	if _, ok := reg.Get("a"); !ok {
		t.Fatal("frozen registry lost a tool")
	}
}

// TestPromptOfAFrozenRegistry: Prompt is RenderPrompt of what it is given;
// a frozen registry answers for all its agent-usable tools from the block
// it rendered when it froze, without allocating.
func TestPromptOfAFrozenRegistry(t *testing.T) {
	var reg tools.Registry
	hidden := tool("b.hidden", nil)
	hidden.Hidden = true
	reg.MustRegister(tool("c.third", nil), tool("a.first", nil), hidden)
	usable := func() []tools.Tool {
		var out []tools.Tool
		for _, tl := range reg.All() {
			if !tl.Hidden {
				out = append(out, tl)
			}
		}
		return out
	}
	all := usable()
	if got, want := reg.Prompt(all), tools.RenderPrompt(all); got != want {
		t.Fatalf("unfrozen Prompt =\n%s\nwant\n%s", got, want)
	}
	reg.Freeze()
	all = usable()
	for _, ts := range [][]tools.Tool{all, all[:1], all[1:], nil, reg.All()} {
		if got, want := reg.Prompt(ts), tools.RenderPrompt(ts); got != want {
			t.Fatalf("Prompt of %d tools =\n%s\nwant\n%s", len(ts), got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = reg.Prompt(all) }); n != 0 {
		t.Fatalf("Prompt of every usable tool of a frozen registry allocated %v times per call, want 0 (rendered at Freeze)", n)
	}
}

// TestUsableAndSchemasOfAFrozenRegistry: Usable lists the agent-usable
// tools sorted by runtime name, and Schemas is the package's Schemas of
// what it is given, before and after Freeze; a frozen registry answers
// both for all its agent-usable tools from what it made when it froze,
// without allocating, and a caller appending to either does not change
// what the next caller gets.
func TestUsableAndSchemasOfAFrozenRegistry(t *testing.T) {
	var reg tools.Registry
	hidden := tool("b.hidden", nil)
	hidden.Hidden = true
	reg.MustRegister(tool("c.third", nil), tool("a.first", nil), hidden)
	names := func(ts []tools.Tool) string {
		var out []string
		for _, tl := range ts {
			out = append(out, tl.Name)
		}
		return strings.Join(out, ",")
	}
	for _, frozen := range []bool{false, true} {
		if frozen {
			reg.Freeze()
		}
		all := reg.Usable()
		if got := names(all); got != "a.first,c.third" {
			t.Fatalf("frozen %v: Usable = %s, want a.first,c.third", frozen, got)
		}
		for _, ts := range [][]tools.Tool{all, all[:1], nil, reg.All()} {
			// As the model sees them (a frozen registry's carry their
			// encoding, made once).
			got, _ := json.Marshal(reg.Schemas(ts))
			want, _ := json.Marshal(tools.Schemas(ts))
			if !bytes.Equal(got, want) {
				t.Fatalf("frozen %v: Schemas of %d tools = %s, want %s", frozen, len(ts), got, want)
			}
		}
	}
	all := reg.Usable()
	_ = append(all, hidden)
	_ = append(reg.Schemas(all), hidden.Schema())
	if got := names(reg.Usable()); got != "a.first,c.third" {
		t.Fatalf("Usable after a caller appended = %s", got)
	}
	if n := testing.AllocsPerRun(100, func() { _ = reg.Schemas(reg.Usable()) }); n != 0 {
		t.Fatalf("Usable and Schemas of a frozen registry allocated %v times per call, want 0 (made at Freeze)", n)
	}
}

func BenchmarkPrompt(b *testing.B) {
	var reg tools.Registry
	for i := range 20 {
		reg.MustRegister(tools.Tool{Name: fmt.Sprintf("tool.n%02d", i), Description: "Does a thing with a path and a mode.", Handler: noop,
			Parameters: map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}, "mode": map[string]any{"type": "string"}}, "required": []string{"path"}}})
	}
	reg.Freeze()
	all := reg.All()
	b.Run("RenderPrompt", func(b *testing.B) {
		for b.Loop() {
			_ = tools.RenderPrompt(all)
		}
	})
	b.Run("FrozenRegistry", func(b *testing.B) {
		for b.Loop() {
			_ = reg.Prompt(all)
		}
	})
}

func TestGetLookupAll(t *testing.T) {
	var reg tools.Registry
	hidden := tool("model", nil)
	hidden.Hidden = true
	reg.MustRegister(tool("fs.read", nil), tool("bash", nil), hidden)

	if got, ok := reg.Get("fs.read"); !ok || got.Name != "fs.read" {
		t.Errorf("Get(fs.read) = %v, %v", got.Name, ok)
	}
	if _, ok := reg.Get("fs_read"); ok {
		t.Error("Get found a tool by its model name")
	}
	if got, ok := reg.Lookup("fs_read"); !ok || got.Name != "fs.read" {
		t.Errorf("Lookup(fs_read) = %v, %v", got.Name, ok)
	}
	if _, ok := reg.Lookup("fs.read"); ok {
		t.Error("Lookup found a tool by its runtime name")
	}
	if _, ok := reg.Lookup("model"); ok {
		t.Error("Lookup found a hidden tool")
	}
	if _, ok := reg.Get("model"); !ok {
		t.Error("Get did not find a hidden tool")
	}
	if got := names(reg.All()); !slices.Equal(got, []string{"bash", "fs.read", "model"}) {
		t.Errorf("All = %v", got)
	}
	if got := reg.ModelNames(); !slices.Equal(got, []string{"bash", "fs_read"}) {
		t.Errorf("ModelNames = %v", got)
	}
	var schemaNames []string
	for _, s := range reg.ModelSchemas() {
		schemaNames = append(schemaNames, s.Name)
	}
	if !slices.Equal(schemaNames, []string{"bash", "fs_read"}) {
		t.Errorf("ModelSchemas names = %v", schemaNames)
	}
	if got := names(reg.Select([]string{"model", "fs.read", "nope"})); !slices.Equal(got, []string{"fs.read", "model"}) {
		t.Errorf("Select = %v", got)
	}
}

// TestGuidance is behaviour check 58.
func TestGuidance(t *testing.T) {
	var reg tools.Registry
	hidden := tool("quit", nil)
	hidden.Hidden = true
	reg.MustRegister(tool("bash", nil), tool("bash.output", nil), tool("fs.read", nil), tool("skill", nil), hidden)
	tests := []struct {
		call    string
		unknown bool
		want    string
	}{
		{call: "bash"},
		{call: "bash_output"},
		{call: "bash.output", unknown: true, want: "Did you mean one of the following?\n- bash_output"},
		{call: "tepadr", unknown: true, want: "Invoke the `skill` tool to list available skills."},
		{call: "fs_reed", unknown: true, want: "Did you mean one of the following?\n- fs_read"},
		{call: "quit", unknown: true, want: "Tool `quit` does not exist."},
	}
	for _, tt := range tests {
		got, unknown := reg.Guidance(tt.call)
		if unknown != tt.unknown || !strings.Contains(got, tt.want) {
			t.Errorf("Guidance(%q) = %q, %v; want %v containing %q", tt.call, got, unknown, tt.unknown, tt.want)
		}
	}
}

func TestResolveName(t *testing.T) {
	var reg tools.Registry
	// "A_B" is a runtime name that casefolds to the alias of "a.b".
	reg.MustRegister(tool("fs.read", nil), tool("a.b", nil), tool("A_B", nil), tool("tape.info", nil))
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"fs.read", "fs.read", true},
		{"fs_read", "fs.read", true},
		{"  FS_Read\t", "fs.read", true},
		{"TAPE.INFO", "tape.info", true},
		{"a_b", "A_B", true}, // runtime names win over aliases
		{"a.b", "a.b", true},
		{"", "", false},
		{"   ", "", false},
		{"fs-read", "", false},
	}
	for _, tt := range tests {
		got, ok := reg.ResolveName(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ResolveName(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestResolveNames(t *testing.T) {
	var reg tools.Registry
	reg.MustRegister(tool("bash", nil), tool("fs.read", nil), tool("subagent", nil), tool("tape.info", nil))
	tests := []struct {
		name           string
		names, exclude []string
		want           []string
		err            string
	}{
		{name: "nil means all", want: []string{"bash", "fs.read", "subagent", "tape.info"}},
		{name: "nil minus excluded", exclude: []string{"subagent"}, want: []string{"bash", "fs.read", "tape.info"}},
		{name: "empty means none", names: []string{}, want: nil},
		{name: "aliases and case", names: []string{"FS_READ", " tape_info ", "fs.read"}, want: []string{"fs.read", "tape.info"}},
		{name: "excluded alias", names: []string{"bash", "tape_info"}, exclude: []string{"TAPE.info"}, want: []string{"bash"}},
		{name: "unknown sorted", names: []string{"zzz", "bash", " nope "}, err: "unknown tool name(s): 'nope', 'zzz'"},
		{name: "unknown excluded", exclude: []string{"ghost"}, err: "unknown tool name(s): 'ghost'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := reg.ResolveNames(tt.names, tt.exclude)
			if tt.err != "" {
				var ue *tools.UnknownToolsError
				if !errors.As(err, &ue) || err.Error() != tt.err {
					t.Fatalf("ResolveNames error = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("ResolveNames = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestRegistryConcurrentUse(t *testing.T) {
	var reg tools.Registry
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if err := reg.Register(tool(fmt.Sprintf("t%d", i), nil)); err != nil {
				t.Error(err)
			}
			reg.All()
			reg.Lookup("t0")
			reg.ResolveName("T1")
		})
	}
	wg.Wait()
	if n := len(reg.All()); n != 8 {
		t.Fatalf("registered %d tools, want 8", n)
	}
}

func names(ts []tools.Tool) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// obj returns an object schema with the given properties.
func obj(properties map[string]any) map[string]any {
	return map[string]any{"type": "object", "properties": properties}
}

// props returns an object schema whose property name has the raw value v.
func props(name string, v any) map[string]any {
	return obj(map[string]any{name: v})
}
