package hooks

import (
	"errors"
	"fmt"
)

// Errors callers branch on.
var (
	// ErrInvalidPlugin is returned when registering a nil plugin or one
	// with an empty name.
	ErrInvalidPlugin = errors.New("hooks: invalid plugin")
	// ErrDuplicatePlugin is returned when registering a second plugin with
	// a name already taken.
	ErrDuplicatePlugin = errors.New("hooks: duplicate plugin name")
	// ErrFrozen is returned when registering after Start or Close.
	ErrFrozen = errors.New("hooks: registry is frozen")
	// ErrScopeOpen is returned by OpenScope while another scope is open.
	ErrScopeOpen = errors.New("hooks: a runtime scope is already open")
	// ErrNoAnswer is returned by hooks that need an answer when no
	// implementation gave one (continue_prompt, and run_model when the
	// selected streaming plugin returns no stream).
	ErrNoAnswer = errors.New("hooks: no implementation answered")
	// ErrAbort, wrapped in an error returned by a before_llm_call or
	// before_tool_call implementation, fails the call instead of being
	// isolated. It exists for fail-closed policies (a remote policy that
	// cannot be reached); ordinary vetoes are decisions.
	ErrAbort = errors.New("hooks: call aborted")
)

// HookError is the error of one plugin's implementation of a hook.
type HookError struct {
	Hook   Hook
	Plugin string
	Err    error
}

// Error returns "hook <hook>: plugin <name>: <err>".
func (e *HookError) Error() string {
	return fmt.Sprintf("hook %s: plugin %q: %v", e.Hook, e.Plugin, e.Err)
}

// Unwrap returns the implementation's error.
func (e *HookError) Unwrap() error { return e.Err }

// PanicError is a panic recovered from a plugin.
type PanicError struct {
	Value any
	Stack []byte
}

// Error returns "panic: <value>".
func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }
