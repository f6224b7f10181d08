package config_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/bubbus/bub/pkg/config"
)

func TestPath(t *testing.T) {
	if got := config.Path("/srv/bub"); got != "/srv/bub/config.yaml" {
		t.Errorf("Path = %q, want /srv/bub/config.yaml", got)
	}
}

func TestLoadMissingFileIsEmpty(t *testing.T) {
	c, err := config.Load(filepath.Join(t.TempDir(), "config.yaml"))
	if err != nil || c == nil || len(c) != 0 {
		t.Errorf("Load(missing) = %v, %v; want an empty config and no error", c, err)
	}
}

func TestLoadErrorsNameFileAndLine(t *testing.T) {
	tests := []struct {
		name, data, want string
		line             int
	}{
		{"unclosed list", "model: echo:echo\nfallback_models: [a, b\n", "not found", 2},
		{"bad indent", "model: a\n  api_key: b\n", "not allowed", 1},
		{"duplicate key", "model: a\nmodel: b\n", "already defined", 2},
		{"list at top", "- a\n- b\n", "top level is a list", 0},
		{"scalar at top", "hello\n", "top level is a scalar", 0},
		{"list as key", "? [a, b]\n: c\n", "invalid key", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, []byte(tt.data), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := config.Load(path)
			var de *config.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("Load = %v, want a *DecodeError", err)
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not name %s and say %q", err, path, tt.want)
			}
			if tt.line > 0 && (de.Line != tt.line || !strings.Contains(err.Error(), fmt.Sprintf("%s:%d:", path, tt.line))) {
				t.Errorf("error %q: line %d, want %d", err, de.Line, tt.line)
			}
		})
	}
}

func TestLoadNullAndEmptyAreEmpty(t *testing.T) {
	for _, data := range []string{"", "null\n", "# only a comment\n", "{}\n", "---\n"} {
		c, err := config.Decode([]byte(data))
		if err != nil || len(c) != 0 {
			t.Errorf("Decode(%q) = %v, %v; want empty", data, c, err)
		}
	}
}

func TestLoadBoundsSizeAndAliases(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	big := "k: " + strings.Repeat("x", config.MaxFileSize) + "\n"
	if err := os.WriteFile(path, []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(path); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("Load(huge) = %v, want a size error", err)
	}
	// Each level repeats the previous one ten times: 10^7 values.
	var b strings.Builder
	b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i <= 7; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [", i, i)
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*a%d", i-1)
		}
		b.WriteString("]\n")
	}
	if _, err := config.Decode([]byte(b.String())); err == nil || !strings.Contains(err.Error(), "aliases") {
		t.Errorf("Decode(alias bomb) = %v, want an error about expanding aliases", err)
	}
}

func TestSaveWritesMode0600AndReplaces(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "home")
	path := config.Path(dir)
	if err := config.Save(path, config.Config{"model": "echo:echo"}); err != nil {
		t.Fatal(err)
	}
	assertMode(t, dir, 0o700|os.ModeDir)
	assertMode(t, path, 0o600)
	// A file made wider by hand ends at 0600 again, with only the new keys.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := config.Save(path, config.Config{"api_key": "sk-x"}); err != nil {
		t.Fatal(err)
	}
	assertMode(t, path, 0o600)
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := (config.Config{"api_key": "sk-x"}); !reflect.DeepEqual(c, want) {
		t.Errorf("after the second Save: %#v, want %#v", map[string]any(c), map[string]any(want))
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("home holds %d entries, want only config.yaml (no temporary file left)", len(entries))
	}
}

func assertMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode() != want {
		t.Errorf("%s mode = %v, want %v", path, st.Mode(), want)
	}
}

func TestSaveLoadRoundTripAndKeyOrder(t *testing.T) {
	c := config.Config{
		"model":            "openai:gpt-4o-mini",
		"api_key":          map[string]any{"openai": "sk-a", "openrouter": "sk-b"},
		"enabled_channels": []any{"telegram", "cli"},
		"stream_output":    true,
		"max_tokens":       uint64(2048),
		"temperature":      0.5,
		"numeric_string":   "123",
		"bool_string":      "true",
		"empty":            "",
		"telegram":         map[string]any{"token": "t", "allow_users": []any{"1", "2"}},
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := config.Save(path, c, "model", "telegram.token", "api_key"); err != nil {
		t.Fatal(err)
	}
	got, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(map[string]any(got), map[string]any(c)) {
		t.Errorf("round trip:\n got %#v\nwant %#v", map[string]any(got), map[string]any(c))
	}
	data, _ := os.ReadFile(path)
	var tops []string
	for line := range strings.Lines(string(data)) {
		if line[0] != ' ' && line[0] != '-' {
			k, _, _ := strings.Cut(line, ":")
			tops = append(tops, strings.Trim(k, `"`))
		}
	}
	want := []string{"model", "telegram", "api_key", "bool_string", "empty", "enabled_channels", "max_tokens", "numeric_string", "stream_output", "temperature"}
	if !reflect.DeepEqual(tops, want) {
		t.Errorf("top-level key order %v, want %v (asked order first, then sorted)", tops, want)
	}
	if i, j := strings.Index(string(data), "token:"), strings.Index(string(data), "allow_users:"); i > j {
		t.Errorf("telegram.token comes after allow_users:\n%s", data)
	}
}

// TestMerge is behaviour check 78 (Bub's merge): nested maps combine,
// scalars are overwritten in place, and what is taken is deep-copied.
func TestMerge(t *testing.T) {
	dst := config.Config{
		"model":    "a:1",
		"telegram": map[string]any{"token": "old", "proxy": "p"},
		"list":     []any{"x"},
	}
	inner := dst["telegram"].(map[string]any)
	src := config.Config{
		"model":    "b:2",
		"telegram": map[string]any{"token": "new", "allow": []any{"u1"}},
		"extra":    map[string]any{"deep": map[string]any{"k": "v"}},
		"list":     []any{"y"},
	}
	got := config.Merge(dst, src)
	want := config.Config{
		"model":    "b:2",
		"telegram": map[string]any{"token": "new", "proxy": "p", "allow": []any{"u1"}},
		"extra":    map[string]any{"deep": map[string]any{"k": "v"}},
		"list":     []any{"y"},
	}
	if !reflect.DeepEqual(map[string]any(got), map[string]any(want)) {
		t.Fatalf("Merge = %#v\nwant %#v", map[string]any(got), map[string]any(want))
	}
	if inner["token"] != "new" {
		t.Error("the nested map of dst was replaced, want it merged in place")
	}
	src["extra"].(map[string]any)["deep"].(map[string]any)["k"] = "changed"
	src["telegram"].(map[string]any)["allow"].([]any)[0] = "changed"
	if got["extra"].(map[string]any)["deep"].(map[string]any)["k"] != "v" || inner["allow"].([]any)[0] != "u1" {
		t.Error("changing src after Merge changed dst: incoming values are not deep-copied")
	}
	if m := config.Merge(nil, config.Config{"a": "b"}); m["a"] != "b" {
		t.Errorf("Merge(nil, …) = %v", m)
	}
	// A nil map in dst is replaced, not written into.
	if m := config.Merge(config.Config{"a": map[string]any(nil)}, config.Config{"a": map[string]any{"b": "c"}}); m["a"].(map[string]any)["b"] != "c" {
		t.Errorf("Merge over a nil map = %v", m)
	}
}

// TestGet is the get_value half of behaviour check 78: dotted paths
// descend into maps; missing paths report false (Bub returns the default
// the caller gives).
func TestGet(t *testing.T) {
	c := config.Config{"telegram": map[string]any{"token": "t", "n": map[string]any{"x": 1}}, "model": "m"}
	tests := []struct {
		path string
		want any
		ok   bool
	}{
		{"model", "m", true},
		{"telegram.token", "t", true},
		{"telegram.n.x", 1, true},
		{"telegram.missing", nil, false},
		{"model.sub", nil, false},
		{"", nil, false},
		{"nope", nil, false},
	}
	for _, tt := range tests {
		got, ok := c.Get(tt.path)
		if ok != tt.ok || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Get(%q) = %v, %v; want %v, %v", tt.path, got, ok, tt.want, tt.ok)
		}
	}
}

func TestSecretsNeverPrinted(t *testing.T) {
	c := config.Config{
		"model":         "openai:gpt-4o",
		"api_key":       map[string]any{"openai": "sk-one"},
		"telegram":      map[string]any{"token": "tg-two", "proxy": "http://proxy"},
		"nats":          map[string]any{"password": "pw-three", "user": "bob"},
		"client_secret": "cs-four",
		"API-KEY":       "sk-five",
		"empty_token":   "",
		"mcp": map[string]any{"servers": map[string]any{
			"files":  map[string]any{"command": "mcp-files", "env": map[string]any{"FILES_KEY": "env-six"}},
			"search": map[string]any{"url": "https://mcp.example", "headers": map[string]any{"Authorization": "Bearer hdr-seven"}},
		}},
	}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("config", "config", c)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("config", "config", c)
	forms := []string{fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s %q", c, c, c, c, c), c.String(), logs.String()}
	for _, f := range forms {
		for _, secret := range []string{"sk-one", "tg-two", "pw-three", "cs-four", "sk-five", "env-six", "hdr-seven"} {
			if strings.Contains(f, secret) {
				t.Errorf("a text form shows %s:\n%s", secret, f)
			}
		}
		for _, visible := range []string{"gpt-4o", "http://proxy", "bob", "openai", "mcp-files", "FILES_KEY", "Authorization", "https://mcp.example"} {
			if !strings.Contains(f, visible) {
				t.Errorf("a text form lacks the non-secret %s:\n%s", visible, f)
			}
		}
	}
	r := c.Redacted()
	if r["api_key"].(map[string]any)["openai"] != "[redacted]" || r["empty_token"] != "" {
		t.Errorf("Redacted = %#v", map[string]any(r))
	}
	if c["api_key"].(map[string]any)["openai"] != "sk-one" {
		t.Error("Redacted changed the original")
	}
}
