package llm

import (
	"fmt"
	"log/slog"
)

// redacted is what every text form of a non-empty [Secret] shows.
const redacted = "[redacted]"

// Secret is a credential such as an API key. Every text form of it — fmt
// verbs (including %#v and %x), slog and JSON — shows "[redacted]" (or ""
// when it is empty), so a Secret inside any struct never reaches a log.
// Use string(s) to read the value.
type Secret string

// String returns "[redacted]", or "" for an empty secret.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// Format prints [Secret.String] for every verb.
func (s Secret) Format(f fmt.State, _ rune) { _, _ = fmt.Fprint(f, s.String()) }

// LogValue implements [slog.LogValuer].
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON encodes the redacted form.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + s.String() + `"`), nil }
