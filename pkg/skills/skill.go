package skills

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/goccy/go-yaml"
)

// FileName is the file that makes a directory a skill.
const FileName = "SKILL.md"

// Source says which root a skill was found under.
type Source string

// The skill sources, in precedence order.
const (
	SourceProject Source = "project"
	SourceGlobal  Source = "global"
	SourceBuiltin Source = "builtin"
)

// Limits of the front matter (the Agent Skills format's field limits, and
// a bound on the YAML text that keeps a hostile SKILL.md from stalling
// the YAML decoder, whose cost grows with the square of nesting depth).
const (
	// MaxNameLen bounds a skill name, in characters.
	MaxNameLen = 64
	// MaxDescriptionLen bounds a description, in characters.
	MaxDescriptionLen = 1024
	// MaxFrontMatter bounds the front matter's YAML text, in bytes; a
	// longer one counts as absent.
	MaxFrontMatter = 16 << 10
)

// Skill is one valid skill. Its fields must not be modified: a catalog
// hands the same values to every caller.
type Skill struct {
	// Name is the front matter's name, equal to the skill directory's name.
	Name string
	// Description is the front matter's description, trimmed.
	Description string
	// Location is the absolute path of the skill's SKILL.md, with symbolic
	// links resolved.
	Location string
	// Source is the root the skill was found under.
	Source Source
	// Metadata is the front matter's optional metadata map; nil when absent.
	Metadata map[string]string

	raw string   // the body before substitution
	cat *Catalog // supplies config values and $PYTHON; may be nil
}

// Dir returns the skill directory (what $SKILL_DIR stands for).
func (s Skill) Dir() string { return filepath.Dir(s.Location) }

// Body returns the skill's instructions: SKILL.md trimmed, without its
// front matter, trimmed again, then with every ${config.<dotted.path>}
// replaced by the configured value (see [Options.Config]) and, after that,
// $SKILL_DIR (also ${SKILL_DIR}) by [Skill.Dir] and $PYTHON by the
// interpreter of [Options.Python]. "$$" becomes "$"; every other "$" is
// left as it is.
func (s Skill) Body() string {
	var lookup Lookup
	python := ""
	if s.cat != nil {
		lookup, python = s.cat.config, s.cat.python()
	}
	body := configRef.ReplaceAllStringFunc(s.raw, func(ref string) string {
		if lookup == nil {
			return ""
		}
		v, ok := lookup(configRef.FindStringSubmatch(ref)[1])
		if !ok {
			return ""
		}
		return configText(v)
	})
	vars := map[string]string{"SKILL_DIR": s.Dir()}
	if python != "" {
		vars["PYTHON"] = python
	}
	return substitute(body, vars)
}

// configRef is a ${config.<dotted.path>} reference (Bub's
// CONFIG_TEMPLATE_PATTERN).
var configRef = regexp.MustCompile(`\$\{\s*config\.([a-zA-Z0-9_.-]+)\s*\}`)

// configText renders a setting as Bub does: strings verbatim, booleans as
// true/false, numbers as Python prints them, anything else as YAML.
func configText(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case bool:
		return strconv.FormatBool(v)
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return fmt.Sprint(v)
	case float32:
		return pythonFloat(float64(v))
	case float64:
		return pythonFloat(v)
	}
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSpace(string(b))
}

// pythonFloat formats f like Python's str(float): the shortest repr, in
// positional notation with a ".0" for integral values when the exponent
// is in [-4, 16), else in scientific notation.
func pythonFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	if a := math.Abs(f); a != 0 && (a < 1e-4 || a >= 1e16) {
		return strconv.FormatFloat(f, 'e', -1, 64)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// placeholder is a Python string.Template placeholder: "$$", $name or
// ${name}.
var placeholder = regexp.MustCompile(`\$(?:(\$)|([_a-zA-Z][_a-zA-Z0-9]*)|\{([_a-zA-Z][_a-zA-Z0-9]*)\})`)

// substitute is Python's string.Template(text).safe_substitute(vars):
// "$$" becomes "$", a placeholder naming a key of vars its value, and
// everything else stays.
func substitute(text string, vars map[string]string) string {
	return placeholder.ReplaceAllStringFunc(text, func(m string) string {
		sub := placeholder.FindStringSubmatch(m)
		switch {
		case sub[1] != "":
			return "$"
		case sub[2] != "":
			if v, ok := vars[sub[2]]; ok {
				return v
			}
		case sub[3] != "":
			if v, ok := vars[sub[3]]; ok {
				return v
			}
		}
		return m
	})
}

// namePattern is the lowercase kebab-case a skill name must match.
var namePattern = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// parsed is the content of a SKILL.md.
type parsed struct {
	front map[string]any // keys lowercased; nil when absent or not a YAML map
	body  string         // trimmed, without the front matter
}

// parse splits a SKILL.md into front matter and body. The trimmed text's
// first line must be "---" and the front matter runs to the next line that
// is "---" (both compared trimmed); it must be a YAML map, else the front
// matter is empty (as it is when longer than [MaxFrontMatter]). Keys are
// lowercased; of keys equal but for case the last one wins.
func parse(text string) parsed {
	// Python reads the file with universal newlines.
	text = strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n")
	text = strings.TrimSpace(text)
	lines := strings.Split(text, "\n")
	if strings.TrimSpace(lines[0]) != "---" {
		return parsed{body: text}
	}
	for i := 1; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "---" {
			continue
		}
		body := strings.TrimSpace(strings.Join(lines[i+1:], "\n"))
		return parsed{front: decodeMap(strings.Join(lines[1:i], "\n")), body: body}
	}
	return parsed{body: text}
}

// decodeMap decodes a YAML map with lowercased keys; anything else (bad
// YAML and text over [MaxFrontMatter] bytes included) is nil.
func decodeMap(src string) map[string]any {
	if len(src) > MaxFrontMatter {
		return nil
	}
	var v any
	if err := yaml.UnmarshalWithOptions([]byte(src), &v, yaml.UseOrderedMap()); err != nil {
		return nil
	}
	ms, ok := v.(yaml.MapSlice)
	if !ok {
		return nil
	}
	out := make(map[string]any, len(ms))
	for _, it := range ms {
		out[strings.ToLower(fmt.Sprint(it.Key))] = it.Value
	}
	return out
}

// The reasons a skill is invalid.
var (
	errNoFrontMatter = errors.New("no front matter: SKILL.md must start with a YAML map between two --- lines")
	errName          = errors.New("name must be a string of 1-64 characters in lowercase kebab-case (a-z, 0-9, single hyphens)")
	errNameDir       = errors.New("name differs from the skill directory's name")
	errDescription   = errors.New("description must be a string of 1-1024 characters")
	errMetadata      = errors.New("metadata must be a map of strings to strings")
	errEncoding      = errors.New("SKILL.md is not valid UTF-8")
)

// newSkill validates the SKILL.md text of the skill directory named dir
// and returns the skill without its location and source, or why it is
// invalid.
func newSkill(dir, text string) (Skill, error) {
	if !utf8.ValidString(text) {
		return Skill{}, errEncoding
	}
	p := parse(text)
	if p.front == nil {
		return Skill{}, errNoFrontMatter
	}
	var errs []error
	name, ok := p.front["name"].(string)
	name = strings.TrimSpace(name)
	switch {
	case !ok || name == "" || len(name) > MaxNameLen || !namePattern.MatchString(name):
		errs = append(errs, errName)
	case name != dir:
		errs = append(errs, errNameDir)
	}
	desc, ok := p.front["description"].(string)
	desc = strings.TrimSpace(desc)
	if !ok || desc == "" || utf8.RuneCountInString(desc) > MaxDescriptionLen {
		errs = append(errs, errDescription)
	}
	meta, err := metadata(p.front["metadata"])
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return Skill{}, err
	}
	return Skill{Name: name, Description: desc, Metadata: meta, raw: p.body}, nil
}

// metadata checks the optional metadata field: absent, null or a flat map
// of strings.
func metadata(v any) (map[string]string, error) {
	if v == nil {
		return nil, nil
	}
	ms, ok := v.(yaml.MapSlice)
	if !ok {
		return nil, errMetadata
	}
	out := make(map[string]string, len(ms))
	for _, it := range ms {
		k, kok := it.Key.(string)
		s, vok := it.Value.(string)
		if !kok || !vok {
			return nil, errMetadata
		}
		out[k] = s
	}
	return out, nil
}
