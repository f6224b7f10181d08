package skills

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bubbus/bub/pkg/bub"
)

// The skill roots below a workspace or home directory.
const (
	// ProjectDir holds the project skills of a workspace and, below the
	// user's home directory, the global skills.
	ProjectDir = ".agents/skills"
	// LegacyProjectDir is the deprecated project root, still scanned
	// (after ProjectDir) with a warning.
	LegacyProjectDir = ".agent/skills"
)

// maxFileSize bounds a SKILL.md; a larger one is skipped as invalid.
const maxFileSize = 4 << 20

// maxCached bounds the parsed SKILL.md files a catalog remembers; past it
// the cache starts over.
const maxCached = 4096

// Lookup returns the value of the setting at a dotted path such as
// "telegram.token" and whether it is set. It implements the configuration's
// precedence itself (an environment variable such as BUB_TELEGRAM_TOKEN
// over the YAML file's telegram.token).
type Lookup func(path string) (value any, ok bool)

// Options configure a [Catalog]. The zero value means: global skills under
// the user's home directory, no builtin skills, no config values, $PYTHON
// from PATH, no logging.
type Options struct {
	// Home is the user's home directory, whose .agents/skills holds the
	// global skills; empty means [os.UserHomeDir] (no global root when
	// that fails).
	Home string
	// Builtin are directories of builtin skills, scanned in order after
	// the global root.
	Builtin []string
	// Config resolves ${config.<dotted.path>} in skill bodies; nil means
	// every reference is unset (replaced by "").
	Config Lookup
	// Python replaces $PYTHON in skill bodies. Empty means python3, else
	// python, found in PATH when a body first needs it; without either,
	// $PYTHON is left as it is.
	Python string
	// Log receives the legacy-root deprecation warning and the reasons
	// skills were skipped; nil discards them.
	Log *slog.Logger
}

// Catalog discovers the skills visible from a workspace (Bub's
// discover_skills). Discovery lists the roots and stats each SKILL.md on
// every call, and reads a SKILL.md again only when its modification time
// or size changed, so calling it for every model step is cheap. It is
// safe for concurrent use.
type Catalog struct {
	home    string
	builtin []string
	config  Lookup
	python  func() string
	log     *slog.Logger

	// mu guards files and warned.
	mu     sync.Mutex
	files  map[string]cached // by SKILL.md path as found under its root
	warned map[string]bool   // legacy roots already warned about
}

// cached is a parsed SKILL.md and the file state it was parsed from.
type cached struct {
	mod   time.Time
	size  int64
	skill Skill
	valid bool
}

// New returns a catalog configured by o.
func New(o Options) *Catalog {
	if o.Home == "" {
		o.Home, _ = os.UserHomeDir()
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	python := o.Python
	return &Catalog{
		home:    o.Home,
		builtin: slices.Clone(o.Builtin),
		config:  o.Config,
		log:     o.Log,
		python: sync.OnceValue(func() string {
			if python != "" {
				return python
			}
			for _, name := range []string{"python3", "python"} {
				if p, err := exec.LookPath(name); err == nil {
					return p
				}
			}
			return ""
		}),
		files:  map[string]cached{},
		warned: map[string]bool{},
	}
}

// root is one directory of skill directories.
type root struct {
	dir    string
	source Source
}

// roots lists the skill roots of workspace in precedence order: the
// project root, the legacy project root when it exists (with a
// deprecation warning, once per catalog), the global root, the builtin
// roots.
func (c *Catalog) roots(workspace string) []root {
	rs := []root{{filepath.Join(workspace, ProjectDir), SourceProject}}
	legacy := filepath.Join(workspace, LegacyProjectDir)
	if fi, err := os.Stat(legacy); err == nil && fi.IsDir() {
		c.warnLegacy(legacy)
		rs = append(rs, root{legacy, SourceProject})
	}
	if c.home != "" {
		rs = append(rs, root{filepath.Join(c.home, ProjectDir), SourceGlobal})
	}
	for _, dir := range c.builtin {
		rs = append(rs, root{dir, SourceBuiltin})
	}
	return rs
}

func (c *Catalog) warnLegacy(dir string) {
	c.mu.Lock()
	first := !c.warned[dir]
	c.warned[dir] = true
	c.mu.Unlock()
	if first {
		c.log.Warn("skills.legacy_dir", "dir", dir, "msg", "found legacy skills directory; move it to "+ProjectDir)
	}
}

// Discover returns the valid skills visible from workspace (empty means
// the current directory): each root's directories in name order, the
// first skill of each (case-folded) name winning, sorted by case-folded
// name. Missing roots and invalid skills are skipped; the reasons go to
// the log. The error is only ctx's.
func (c *Catalog) Discover(ctx context.Context, workspace string) ([]Skill, error) {
	if workspace == "" {
		workspace, _ = os.Getwd()
	}
	var out []Skill
	seen := map[string]bool{}
	for _, r := range c.roots(workspace) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		entries, err := os.ReadDir(r.dir)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				c.log.Debug("skills.root_unreadable", "dir", r.dir, "err", err)
			}
			continue
		}
		for _, e := range entries {
			// A valid name is lowercase: its own case folding.
			s, ok := c.load(r, e.Name())
			if !ok || seen[s.Name] {
				continue
			}
			seen[s.Name] = true
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b Skill) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Visible returns the skills of [Catalog.Discover] that state's
// allowed_skills admits (see [Allowed]).
func (c *Catalog) Visible(ctx context.Context, workspace string, state *bub.State) ([]Skill, error) {
	all, err := c.Discover(ctx, workspace)
	if err != nil {
		return nil, err
	}
	set, limited := allowList(state)
	if !limited {
		return all, nil
	}
	out := all[:0]
	for _, s := range all {
		if set[fold(s.Name)] {
			out = append(out, s)
		}
	}
	return out, nil
}

// Prompt returns the skills block of a step's system prompt (see
// [Render]): the skills visible from the state's workspace, with those
// whose names prompt hints at as $name expanded. It is "" when no skill
// is visible.
func (c *Catalog) Prompt(ctx context.Context, prompt string, state *bub.State) (string, error) {
	workspace := ""
	if state != nil {
		workspace = state.Workspace()
	}
	list, err := c.Visible(ctx, workspace, state)
	if err != nil {
		return "", err
	}
	return Render(list, Hints(prompt)), nil
}

// load returns the skill in directory name of r, parsing its SKILL.md
// unless the cached parse is still current.
func (c *Catalog) load(r root, name string) (Skill, bool) {
	path := filepath.Join(r.dir, name, FileName)
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return Skill{}, false // not a skill directory
	}
	c.mu.Lock()
	ent, hit := c.files[path]
	c.mu.Unlock()
	if !hit || !ent.mod.Equal(fi.ModTime()) || ent.size != fi.Size() {
		ent = cached{mod: fi.ModTime(), size: fi.Size()}
		ent.skill, err = c.read(path, name, fi.Size())
		if err != nil {
			c.log.Warn("skills.invalid", "path", path, "err", err)
		}
		ent.valid = err == nil
		c.mu.Lock()
		if len(c.files) >= maxCached {
			clear(c.files)
		}
		c.files[path] = ent
		c.mu.Unlock()
	}
	s := ent.skill
	s.Source = r.source
	return s, ent.valid
}

// read parses and validates the SKILL.md at path of the directory name.
func (c *Catalog) read(path, name string, size int64) (Skill, error) {
	if size > maxFileSize {
		return Skill{}, errors.New("SKILL.md is larger than 4 MiB")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Skill{}, err
	}
	s, err := newSkill(name, string(b))
	if err != nil {
		return Skill{}, err
	}
	if s.Location, err = filepath.EvalSymlinks(path); err != nil {
		s.Location = path
	}
	if abs, err := filepath.Abs(s.Location); err == nil {
		s.Location = abs
	}
	s.cat = c
	return s, nil
}

// Allowed reports whether state's allowed_skills key admits the skill
// name, compared case-folded. Without the key, or with a nil value, every
// name is allowed; a list ([]string or []any of strings) admits its
// members; any other value admits none.
func Allowed(state *bub.State, name string) bool {
	set, limited := allowList(state)
	return !limited || set[fold(name)]
}

// allowList returns the case-folded allow-list of state and whether there
// is one.
func allowList(state *bub.State) (map[string]bool, bool) {
	if state == nil {
		return nil, false
	}
	v, ok := state.Get(bub.StateAllowedSkills)
	if !ok || v == nil {
		return nil, false
	}
	set := map[string]bool{}
	switch l := v.(type) {
	case []string:
		for _, s := range l {
			set[fold(s)] = true
		}
	case []any:
		for _, it := range l {
			if s, ok := it.(string); ok {
				set[fold(s)] = true
			}
		}
	}
	return set, true
}

// fold is the case folding of skill names (Python's str.casefold, which
// equals lowercasing for the ASCII a valid name consists of).
func fold(s string) string { return strings.ToLower(s) }
