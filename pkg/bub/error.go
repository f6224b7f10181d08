package bub

import (
	"errors"
	"fmt"
)

// Kind classifies an [Error]; the values are Bub's error kinds.
type Kind string

// The error kinds of Bub.
const (
	KindInvalidInput Kind = "invalid_input"
	KindConfig       Kind = "config"
	KindProvider     Kind = "provider"
	KindTool         Kind = "tool"
	KindTemporary    Kind = "temporary"
	KindNotFound     Kind = "not_found"
	KindUnknown      Kind = "unknown"
)

// Error is Bub's BubError: a failure with a kind, a message and optional
// details. Its text form is "[kind] message".
type Error struct {
	Kind    Kind
	Message string
	Details map[string]any
}

// Errorf returns an *Error of the given kind with a formatted message.
func Errorf(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// Error returns "[kind] message".
func (e *Error) Error() string { return "[" + string(e.Kind) + "] " + e.Message }

// AsMap returns {kind, message} plus details when non-empty, the shape Bub
// stores on tapes and gives the model as a failed tool result.
func (e *Error) AsMap() map[string]any {
	m := map[string]any{"kind": string(e.Kind), "message": e.Message}
	if len(e.Details) > 0 {
		m["details"] = e.Details
	}
	return m
}

// AsError returns err as an *Error when it is (or wraps) one, and otherwise
// a new *Error of kind unknown carrying err's text.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var be *Error
	if errors.As(err, &be) {
		return be
	}
	return &Error{Kind: KindUnknown, Message: err.Error()}
}
