package jsonltape

import (
	"context"

	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/tape"
)

// EnvDir is the environment variable [FromEnv] reads the tape directory
// from.
const EnvDir = "BUB_JSONL_TAPE_DIR"

// Plugin is the "jsonltape" plugin: it provides a [Store] on its directory
// for every runtime scope (provide_tape_store). With no directory it
// provides nothing, so the next provider (JetStream by default) answers.
type Plugin struct {
	dir  string
	opts []Option
}

var (
	_ hooks.Plugin                        = (*Plugin)(nil)
	_ hooks.TapeStoreProvider[tape.Store] = (*Plugin)(nil)
	_ hooks.Describer                     = (*Plugin)(nil)
)

// New returns the plugin providing stores of the tapes in dir, created
// with opts; an empty dir provides none.
func New(dir string, opts ...Option) *Plugin { return &Plugin{dir: dir, opts: opts} }

// FromEnv returns the plugin on the directory named by $BUB_JSONL_TAPE_DIR
// ([EnvDir]); when it is unset or empty the plugin provides no store.
func FromEnv(getenv func(string) string, opts ...Option) *Plugin {
	return New(getenv(EnvDir), opts...)
}

// Name implements [hooks.Plugin].
func (*Plugin) Name() string { return "jsonltape" }

// Describe implements [hooks.Describer] for `bub hooks`.
func (p *Plugin) Describe() hooks.Description {
	if p.dir == "" {
		return hooks.Description{Detail: "no tape directory: provides no tape store"}
	}
	return hooks.Description{Detail: "JSONL tape store in " + p.dir}
}

// ProvideTapeStore implements [hooks.TapeStoreProvider]: a new [Store] on
// the directory, which the scope closes when it ends.
func (p *Plugin) ProvideTapeStore(ctx context.Context, in hooks.ProvideTapeStoreInput) (tape.Store, bool, error) {
	if p.dir == "" {
		return nil, false, nil
	}
	s, err := NewStore(p.dir, p.opts...)
	if err != nil {
		return nil, false, err
	}
	return s, true, nil
}
