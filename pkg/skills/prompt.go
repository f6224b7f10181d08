package skills

import (
	"regexp"
	"strings"
)

// hint is a $name token of a prompt (Bub's HINT_RE).
var hint = regexp.MustCompile(`\$([A-Za-z0-9_.-]+)`)

// Hints returns the names of the $name tokens in prompt ([A-Za-z0-9_.-]+
// after a "$"), as written: a skill is expanded in the block when one of
// them equals its name.
func Hints(prompt string) map[string]bool {
	ms := hint.FindAllStringSubmatch(prompt, -1)
	if len(ms) == 0 {
		return nil
	}
	out := make(map[string]bool, len(ms))
	for _, m := range ms {
		out[m[1]] = true
	}
	return out
}

// Render returns Bub's skills block: "<available_skills>", one
// "- <name>: <description>" line per skill, "</available_skills>", joined
// by newlines. A skill named in expanded adds "\n  Location: <path>" and,
// when its [Skill.Body] is not empty, "\n<body>". No skills render "".
func Render(list []Skill, expanded map[string]bool) string {
	if len(list) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("<available_skills>")
	for _, s := range list {
		b.WriteString("\n- " + s.Name + ": " + s.Description)
		if !expanded[s.Name] {
			continue
		}
		b.WriteString("\n  Location: " + s.Location)
		if body := s.Body(); body != "" {
			b.WriteString("\n" + body)
		}
	}
	b.WriteString("\n</available_skills>")
	return b.String()
}
