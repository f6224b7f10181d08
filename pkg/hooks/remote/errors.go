package remote

import (
	"errors"
	"fmt"

	"github.com/bubbus/bub/pkg/hooks"
)

// Outcome is how one interceptor call ended. [Stats] counts calls per
// outcome.
type Outcome string

// The outcomes of an interceptor call.
const (
	// OutcomeOK: the interceptor answered with a well-formed reply.
	OutcomeOK Outcome = "ok"
	// OutcomeNoResponders: no instance of the service serves the hook.
	OutcomeNoResponders Outcome = "no_responders"
	// OutcomeTimeout: no reply before the call's deadline (the configured
	// timeout or the caller's deadline, whichever came first).
	OutcomeTimeout Outcome = "timeout"
	// OutcomeMalformed: the reply was not valid JSON or not a valid answer
	// of the hook.
	OutcomeMalformed Outcome = "malformed"
	// OutcomeRemoteError: the interceptor answered with an error.
	OutcomeRemoteError Outcome = "remote_error"
	// OutcomeTransport: the request could not be sent (connection closed,
	// unencodable input, larger than the server's max_payload).
	OutcomeTransport Outcome = "transport"
	// OutcomeCancelled: the caller's context ended first. It is not a
	// failure of the interceptor; no failure policy applies.
	OutcomeCancelled Outcome = "cancelled"
)

// ErrMalformedReply is wrapped by the error of a call whose reply was
// malformed.
var ErrMalformedReply = errors.New("remote: malformed reply")

// CallError is the error of a failed interceptor call. Err is the cause:
// nats.ErrNoResponders, context.DeadlineExceeded, an error wrapping
// [ErrMalformedReply], the interceptor's *bub.Error (kind and message as it
// sent them), a transport error, or the caller's context error.
type CallError struct {
	Service string
	Hook    hooks.Hook
	Outcome Outcome
	Err     error
}

// Error returns "interceptor <service> <hook>: <outcome>: <err>".
func (e *CallError) Error() string {
	return fmt.Sprintf("interceptor %q %s: %s: %v", e.Service, e.Hook, e.Outcome, e.Err)
}

// Unwrap returns the cause.
func (e *CallError) Unwrap() error { return e.Err }

// outcomeOf returns the outcome of a failed call's error.
func outcomeOf(err error) Outcome {
	if ce, ok := errors.AsType[*CallError](err); ok {
		return ce.Outcome
	}
	return OutcomeTransport
}
