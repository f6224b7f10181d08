package tools_test

import (
	"slices"
	"testing"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/tools"
)

func TestModelNameAndSchema(t *testing.T) {
	// Behaviour check 65: the model tool of "tests.rename_me" is
	// "tests_rename_me" and the runtime name is unchanged.
	tl := tools.Tool{Name: "tests.rename_me", Description: "d", Handler: noop}
	if got := tl.ModelName(); got != "tests_rename_me" {
		t.Errorf("ModelName = %q", got)
	}
	s := tl.Schema()
	if s.Name != "tests_rename_me" || s.Description != "d" || s.Parameters["type"] != "object" {
		t.Errorf("Schema = %+v", s)
	}
	if tl.Name != "tests.rename_me" {
		t.Errorf("Name changed to %q", tl.Name)
	}
	params := obj(map[string]any{"a": map[string]any{"type": "string"}})
	tl.Parameters = params
	if s := tl.Schema(); s.Parameters["properties"] == nil {
		t.Errorf("Schema dropped the parameters: %+v", s)
	}
}

func TestParamNames(t *testing.T) {
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"z": map[string]any{}, "b": map[string]any{}, "path": map[string]any{}, "a": map[string]any{},
		},
		"required": []any{"path", "b"},
	}
	tests := []struct {
		name  string
		order []string
		want  []string
	}{
		{name: "required first, rest sorted", want: []string{"path", "b", "a", "z"}},
		{name: "explicit order", order: []string{"z", "path", "a", "b"}, want: []string{"z", "path", "a", "b"}},
		{name: "partial order", order: []string{"z"}, want: []string{"z", "path", "b", "a"}},
	}
	for _, tt := range tests {
		tl := tools.Tool{Name: "x", Parameters: schema, Order: tt.order}
		if got := tl.ParamNames(); !slices.Equal(got, tt.want) {
			t.Errorf("%s: ParamNames = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestRenderPrompt is behaviour check 60.
func TestRenderPrompt(t *testing.T) {
	signature := tools.Tool{
		Name:        "tests.prompt_signature",
		Description: "Read a file",
		Parameters: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"path":   map[string]any{"type": "string"},
				"offset": map[string]any{"type": "integer", "default": 0},
			},
			"required": []string{"path"},
		},
	}
	plain := tools.Tool{Name: "tests.no_description", Parameters: obj(map[string]any{"x": map[string]any{}})}
	noParams := tools.Tool{Name: "ping", Description: "Ping."}
	hidden := tools.Tool{Name: "quit", Description: "Quit.", Hidden: true}
	ordered := tools.Tool{
		Name:       "bash",
		Parameters: obj(map[string]any{"cmd": map[string]any{}, "cwd": map[string]any{}, "background": map[string]any{}}),
		Order:      []string{"cmd", "cwd", "background"},
	}

	tests := []struct {
		name  string
		tools []tools.Tool
		want  string
	}{
		{name: "empty", want: ""},
		{name: "only hidden", tools: []tools.Tool{hidden}, want: ""},
		{
			name:  "mixed",
			tools: []tools.Tool{signature, plain, hidden, noParams, ordered},
			want: "<available_tools>\n" +
				"- tests_prompt_signature(path, offset?): Read a file\n" +
				"- tests_no_description(x?)\n" +
				"- ping(): Ping.\n" +
				"- bash(cmd?, cwd?, background?)\n" +
				"</available_tools>",
		},
	}
	for _, tt := range tests {
		if got := tools.RenderPrompt(tt.tools); got != tt.want {
			t.Errorf("%s: RenderPrompt =\n%s\nwant\n%s", tt.name, got, tt.want)
		}
	}
}

func TestSchemasSkipHidden(t *testing.T) {
	got := tools.Schemas([]tools.Tool{{Name: "b.x"}, {Name: "quit", Hidden: true}, {Name: "a"}})
	if len(got) != 2 || got[0].Name != "b_x" || got[1].Name != "a" {
		t.Fatalf("Schemas = %+v", got)
	}
}

func TestContextFallbacks(t *testing.T) {
	dir := t.TempDir()
	state := bub.NewState(map[string]any{bub.StateSessionID: "cli:room", bub.StateWorkspace: dir})
	tests := []struct {
		name               string
		tc                 *tools.Context
		workspace, session string
	}{
		{name: "nil", tc: nil},
		{name: "empty", tc: &tools.Context{}},
		{name: "from state", tc: &tools.Context{State: state}, workspace: dir, session: "cli:room"},
		{name: "fields win", tc: &tools.Context{State: state, Workspace: "/w", SessionID: "s"}, workspace: "/w", session: "s"},
	}
	for _, tt := range tests {
		if got := tt.tc.WorkspaceDir(); got != tt.workspace {
			t.Errorf("%s: WorkspaceDir = %q, want %q", tt.name, got, tt.workspace)
		}
		if got := tt.tc.Session(); got != tt.session {
			t.Errorf("%s: Session = %q, want %q", tt.name, got, tt.session)
		}
	}
}
