package hooks

import "context"

// Plugin is a registered value that may implement any of the hook
// interfaces in hookspecs.go and the optional capabilities below. Its name
// is unique within a [Registry]; `bub hooks` and the logs identify the
// plugin by it.
type Plugin interface {
	Name() string
}

// Starter is implemented by plugins that need to provision resources
// before use. [Registry.Start] starts plugins in registration order.
type Starter interface {
	Start(ctx context.Context) error
}

// Closer is implemented by plugins, tape stores and steering inboxes that
// hold resources. [Registry.Close] closes started plugins in reverse
// registration order; a [Scope] closes the resources it resolved.
type Closer interface {
	Close(ctx context.Context) error
}

// Description says where a plugin runs. The zero value is an in-process
// plugin.
type Description struct {
	// Remote is true for plugins whose hooks are served by another process
	// (interceptor services reached over NATS).
	Remote bool `json:"remote"`
	// Service names the interceptor service of a remote plugin.
	Service string `json:"service,omitempty"`
	// Detail is free text for `bub hooks`, e.g. timeout and failure policy.
	Detail string `json:"detail,omitempty"`
}

// Describer is implemented by plugins that describe themselves in
// [Registry.Report], chiefly remote plugins.
type Describer interface {
	Describe() Description
}

// Unwrapper is implemented by plugin wrappers (metrics, tracing, …). A
// capability the wrapper lacks is looked up on the wrapped plugin, so a
// wrapper never hides one.
type Unwrapper interface {
	Unwrap() Plugin
}

// HookSelector is implemented by plugins whose method set is wider than
// the hooks they serve: a remote plugin type implements every hook it can
// forward, but a given interceptor service serves only some of them. The
// registry asks once, at registration; an implementation of an unserved
// hook is ignored as if the method did not exist. Like every capability,
// the selector is looked up through wrappers, so a wrapper without its own
// selector inherits its plugin's.
type HookSelector interface {
	ServesHook(h Hook) bool
}

// As returns v as capability T, looking through [Unwrapper] wrappers. It is
// the one place capabilities are detected (the registry and the
// interceptor host both use it), so a wrapper never hides a capability.
func As[T any](v any) (T, bool) {
	for v != nil {
		if c, ok := v.(T); ok {
			return c, true
		}
		u, ok := v.(Unwrapper)
		if !ok {
			break
		}
		v = u.Unwrap()
	}
	var zero T
	return zero, false
}

// hookOf returns p's implementation T of hook h, honouring [HookSelector].
func hookOf[T any](p Plugin, h Hook) (T, bool) {
	if sel, ok := As[HookSelector](p); ok && !sel.ServesHook(h) {
		var zero T
		return zero, false
	}
	return As[T](p)
}
