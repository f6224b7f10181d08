package tools

import (
	"fmt"
	"slices"
)

// Effect is a tool's effect class: what running a call of it a second
// time does to the world. A runtime that must decide whether a call that
// started but never finished may run again (a worker resuming an
// interrupted turn) reads it through [Tool.EffectClass].
type Effect string

// The effect classes.
const (
	// EffectReadOnly tools change nothing (fs.read, web.fetch, tape.search):
	// running one again is always safe.
	EffectReadOnly Effect = "read_only"
	// EffectIdempotent tools change the world, but a second identical call
	// changes nothing more (fs.write of the same content, bash.kill).
	EffectIdempotent Effect = "idempotent"
	// EffectIrreversible tools may change the world again on every call
	// (bash, fs.edit, subagent). It is the class of a tool that declares
	// none: a runtime that does not know what a tool does must not assume
	// that repeating it is harmless.
	EffectIrreversible Effect = "irreversible"
)

// Effects lists the effect classes, safest first.
var Effects = []Effect{EffectReadOnly, EffectIdempotent, EffectIrreversible}

// ParseEffect parses an effect class name ("read_only", "idempotent",
// "irreversible"); "" is [EffectIrreversible], the class of a tool that
// declares none.
func ParseEffect(s string) (Effect, error) {
	if s == "" {
		return EffectIrreversible, nil
	}
	if e := Effect(s); slices.Contains(Effects, e) {
		return e, nil
	}
	return "", fmt.Errorf("effect class %q: want one of read_only, idempotent, irreversible", s)
}

// EffectClass returns the tool's declared [Tool.Effect], or
// [EffectIrreversible] when it declares none.
func (t Tool) EffectClass() Effect {
	if t.Effect == "" {
		return EffectIrreversible
	}
	return t.Effect
}
