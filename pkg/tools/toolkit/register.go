package toolkit

import (
	"context"
	"errors"
	"math"
	"net/http"
	"time"

	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/skills"
	"github.com/bubbus/bub/pkg/tools"
)

// Options are the dependencies of the builtin tools. Apart from Shells,
// the zero value of every field means its documented default.
type Options struct {
	// Shells runs the processes of bash, bash.output, bash.kill and quit.
	// Required; the caller owns it and closes it on shutdown.
	Shells *Shells
	// HTTPClient sends web.fetch requests; nil means http.DefaultClient.
	HTTPClient *http.Client
	// MaxFetchBytes caps a web.fetch body; 0 means 5 MiB. Longer bodies
	// are cut with a note.
	MaxFetchBytes int64
	// Quit is what the quit tool calls after terminating the session's
	// shells: stopping the session's other tasks (Bub's
	// quit_via_channel_router). Nil means there is nothing more to stop.
	Quit func(ctx context.Context, sessionID string) error
	// RuntimeOptions returns what provide_runtime_options offers for a
	// session; `,model` without a model lists it. Nil means `,model`
	// always needs a model.
	RuntimeOptions RuntimeOptions
	// Skills is what the skill tool reads; nil means a catalog of the
	// workspace's and the user's skills without config values
	// (skills.New(skills.Options{})). The agent's skills block should
	// use the same catalog.
	Skills *skills.Catalog

	registry *tools.Registry // set by Register, for the subagent tool
}

// RuntimeOptions returns the runtime choices of a session (the hook
// registry's provide_runtime_options).
type RuntimeOptions func(ctx context.Context, sessionID string) (hooks.RuntimeOptions, error)

// toolsets lists the builtin tool groups, one per file. A group added in
// its own file (spill.read, say) is one more entry.
var toolsets = []func(Options) []tools.Tool{shellTools, fsTools, webTools, sessionTools, tapeTools, skillTools, subagentTools}

// Register adds the builtin tools to reg. It fails when opts.Shells is
// nil or a tool cannot be registered (e.g. its name is taken).
func Register(reg *tools.Registry, opts Options) error {
	if opts.Shells == nil {
		return errors.New("register builtin tools: Options.Shells is required")
	}
	opts.registry = reg
	if opts.Skills == nil {
		opts.Skills = skills.New(skills.Options{})
	}
	var errs []error
	for _, set := range toolsets {
		for _, t := range set(opts) {
			errs = append(errs, reg.Register(t))
		}
	}
	return errors.Join(errs...)
}

// param describes one tool parameter for [withParams].
type param struct {
	name, typ, description string
	required               bool
	def                    any            // default value; nil means none
	extra                  map[string]any // further schema keywords, e.g. items
}

// withParams sets t's parameter schema and signature order from params.
func withParams(t tools.Tool, params ...param) tools.Tool {
	props := make(map[string]any, len(params))
	var required []string
	t.Order = make([]string, 0, len(params))
	for _, p := range params {
		schema := map[string]any{"type": p.typ, "description": p.description}
		if p.def != nil {
			schema["default"] = p.def
		}
		for k, v := range p.extra {
			schema[k] = v
		}
		props[p.name] = schema
		t.Order = append(t.Order, p.name)
		if p.required {
			required = append(required, p.name)
		}
	}
	t.Parameters = map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		t.Parameters["required"] = required
	}
	return t
}

// Accessors for validated arguments. Validation guarantees the types; the
// fallbacks only keep a directly called handler from panicking.

func stringArg(args map[string]any, name string) string {
	s, _ := args[name].(string)
	return s
}

func intArg(args map[string]any, name string) (int, bool) {
	n, ok := args[name].(int)
	return n, ok
}

// window returns the part [start, end) of n items that the offset and
// limit arguments select (Python's items[offset:offset+limit], without
// overflowing on a huge limit).
func window(args map[string]any, n int) (start, end int) {
	offset, _ := intArg(args, "offset")
	start, end = max(0, min(offset, n)), n
	if limit, ok := intArg(args, "limit"); ok {
		end = start + min(max(0, limit), n-start)
	}
	return start, end
}

// seconds is a duration of n seconds, at most the longest time.Duration
// (a huge timeout argument overflowed into a negative one, which fired at
// once).
func seconds(n int) time.Duration {
	return time.Duration(min(int64(n), int64(math.MaxInt64/time.Second))) * time.Second
}

func boolArg(args map[string]any, name string) bool {
	b, _ := args[name].(bool)
	return b
}
