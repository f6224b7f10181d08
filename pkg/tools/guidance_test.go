package tools

import (
	"slices"
	"strings"
	"testing"
)

// bubModelNames is Bub's model-visible tool set.
var bubModelNames = []string{
	"bash", "bash_output", "bash_kill", "fs_read", "fs_write", "fs_edit", "skill", "tape_info",
	"tape_search", "tape_reset", "tape_handoff", "tape_anchors", "web_fetch", "subagent", "spill_read",
}

// TestRatio pins ratio to Python's difflib.SequenceMatcher(None, a, b).ratio().
func TestRatio(t *testing.T) {
	tests := []struct {
		a, b string
		want float64
	}{
		{"fs_read", "fs_reed", 0.8571428571428571},
		{"tape_info", "tepadr", 0.26666666666666666},
		{"abcd", "bcda", 0.75},
		{"", "", 1},
		{"a", "", 0},
		{"kitten", "sitting", 0.6153846153846154},
		{"bash_output", "bash_outpt", 0.9523809523809523},
		// b of 200+ runes: difflib ignores "popular" elements.
		{strings.Repeat("ab", 150) + "xyz", strings.Repeat("aaab", 60), 0.003683241252302026},
		{strings.Repeat("the quick brown fox ", 12), strings.Repeat("a quick brown dog jumps ", 10), 0},
	}
	for _, tt := range tests {
		if got := ratio([]rune(tt.a), []rune(tt.b)); got != tt.want {
			t.Errorf("ratio(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

// TestCloseMatches pins closeMatches to difflib.get_close_matches(w,
// bubModelNames, n=3, cutoff=0.6).
func TestCloseMatches(t *testing.T) {
	tests := map[string][]string{
		"fs_reed":    {"fs_read", "fs_edit", "fs_write"},
		"tepadr":     {},
		"bash_outpt": {"bash_output"},
		"tape":       {"tape_info"},
		"web":        {},
		"fs_":        {"fs_read", "fs_edit"},
		"bash_kil":   {"bash_kill", "bash", "skill"},
	}
	for word, want := range tests {
		if got := closeMatches(word, bubModelNames, 3, 0.6); !slices.Equal(got, want) {
			t.Errorf("closeMatches(%q) = %v, want %v", word, got, want)
		}
	}
}

// TestUnknownToolGuidance is behaviour check 58 (the guidance half; known
// names never reach it).
func TestUnknownToolGuidance(t *testing.T) {
	withoutSkill := slices.DeleteFunc(slices.Clone(bubModelNames), func(n string) bool { return n == "skill" })
	tests := []struct {
		name     string
		call     string
		known    []string
		hasSkill bool
		want     string
	}{
		{
			name: "close match", call: "fs_reed", known: bubModelNames, hasSkill: true,
			want: "Tool `fs_reed` does not exist. Did you mean one of the following?\n- fs_read\n- fs_edit\n- fs_write",
		},
		{
			name: "skill hint", call: "tepadr", known: bubModelNames, hasSkill: true,
			want: "Tool `tepadr` does not exist. Invoke the `skill` tool to list available skills.",
		},
		{
			name: "nothing similar", call: "tepadr", known: withoutSkill,
			want: "Tool `tepadr` does not exist. No similar tool is available.",
		},
		{
			name: "no tools", call: "x",
			want: "Tool `x` does not exist. No similar tool is available.",
		},
	}
	for _, tt := range tests {
		if got := UnknownToolGuidance(tt.call, tt.known, tt.hasSkill); got != tt.want {
			t.Errorf("%s: guidance =\n%s\nwant\n%s", tt.name, got, tt.want)
		}
	}
}
