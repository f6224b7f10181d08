package events

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"sync"
)

// Registry maps custom event types to CloudEvent types, so custom events
// cross NATS with an explicit, versioned type like the built-in ones
// (a type is never derived from a Go type name; docs/events/README.md,
// "Types"). A custom event
// that is not registered stays in the process: every handler on the
// [Bus] sees it, the [Bridge] does not publish it.
//
// A registered event is its own payload: its exported fields are encoded
// as JSON ([Meta] and [TapeMeta] fields never are), and [Codec.DecodePayload]
// returns a new value of the registered type. Its JSON Schema is the
// registrant's to publish.
//
// The zero value is an empty registry ready to use; it is safe for
// concurrent use. Registries are values: each service builds its own.
type Registry struct {
	mu   sync.RWMutex
	byGo map[reflect.Type]string // guarded by mu
	byCE map[string]reflect.Type // guarded by mu
}

// Registration errors.
var (
	// ErrDuplicateType: the Go type or the CloudEvent type is registered
	// already.
	ErrDuplicateType = errors.New("type already registered")
	// ErrInvalidType: the CloudEvent type is malformed or reserved, or the
	// Go type cannot be a registered event.
	ErrInvalidType = errors.New("invalid event type")
)

// customTypeRE is a reverse-DNS CloudEvent type with a version suffix,
// e.g. "com.example.order.reviewed.v1". Its tokens are valid NATS subject
// tokens, so [SubjectName] of it can end a subject.
var customTypeRE = regexp.MustCompile(`^[a-z0-9]+(\.[a-z0-9_-]+)+\.v[0-9]+$`)

// RegisterType maps the custom event type T, a pointer to a struct that
// embeds [Meta] or [TapeMeta], to the CloudEvent type ceType: a
// reverse-DNS name ending in a version, e.g.
// "com.example.order.reviewed.v1". The "dev.bub." prefix is reserved for
// the built-in types, whose events need no registration. Its events are
// published on bub.events.<session>.<SubjectName(ceType)>.
func RegisterType[T Event](r *Registry, ceType string) error {
	t := reflect.TypeFor[T]()
	fail := func(err error, why string, args ...any) error {
		return fmt.Errorf("events: registering %s as %q: %w: %s", t, ceType, err, fmt.Sprintf(why, args...))
	}
	switch {
	case t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct:
		return fail(ErrInvalidType, "not a pointer to a struct")
	case t.Implements(reflect.TypeFor[wireEvent]()):
		return fail(ErrInvalidType, "a built-in event has its own type")
	case strings.HasPrefix(ceType, typePrefix):
		return fail(ErrInvalidType, "the %q prefix is reserved", typePrefix)
	case !customTypeRE.MatchString(ceType):
		return fail(ErrInvalidType, "want a lowercase reverse-DNS name ending in .v<N>, e.g. com.example.order.reviewed.v1")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev, ok := r.byGo[t]; ok {
		return fail(ErrDuplicateType, "%s is registered as %q", t, prev)
	}
	if prev, ok := r.byCE[ceType]; ok {
		return fail(ErrDuplicateType, "%q is registered for %s", ceType, prev)
	}
	if r.byGo == nil {
		r.byGo = map[reflect.Type]string{}
		r.byCE = map[string]reflect.Type{}
	}
	r.byGo[t] = ceType
	r.byCE[ceType] = t
	return nil
}

// typeOf returns the CloudEvent type registered for ev's Go type. A nil
// registry has none.
func (r *Registry) typeOf(ev Event) (string, bool) {
	if r == nil {
		return "", false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	typ, ok := r.byGo[reflect.TypeOf(ev)]
	return typ, ok
}

// newValue returns a pointer to a new zero value of the Go type
// registered for ceType.
func (r *Registry) newValue(ceType string) (any, bool) {
	if r == nil {
		return nil, false
	}
	r.mu.RLock()
	t, ok := r.byCE[ceType]
	r.mu.RUnlock()
	if !ok {
		return nil, false
	}
	return reflect.New(t.Elem()).Interface(), true
}
