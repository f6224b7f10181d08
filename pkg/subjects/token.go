package subjects

import (
	"errors"
	"strings"
)

const hexdigits = "0123456789abcdef"

// Token encodes arbitrary text (a session id, a channel name) as one
// subject-safe token. Bytes in [A-Za-z0-9-] pass through, every other byte
// becomes "_" plus two lowercase hex digits, and the empty string becomes
// "_". The encoding is injective, so distinct ids never share a subject,
// and readable for common ids: "telegram:123" → "telegram_3a123".
func Token(s string) string {
	if s == "" {
		return "_"
	}
	if isPlain(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if plainByte(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('_')
		b.WriteByte(hexdigits[c>>4])
		b.WriteByte(hexdigits[c&0xf])
	}
	return b.String()
}

func isPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		if !plainByte(s[i]) {
			return false
		}
	}
	return true
}

func plainByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-'
}

// ErrBadToken is returned by [ParseToken] for text [Token] cannot produce.
var ErrBadToken = errors.New("subjects: malformed token")

// ParseToken inverts [Token].
func ParseToken(tok string) (string, error) {
	if tok == "_" {
		return "", nil
	}
	if tok == "" {
		return "", ErrBadToken
	}
	var b strings.Builder
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if plainByte(c) {
			b.WriteByte(c)
			continue
		}
		if c != '_' || i+2 >= len(tok) {
			return "", ErrBadToken
		}
		hi, lo := unhex(tok[i+1]), unhex(tok[i+2])
		if hi < 0 || lo < 0 {
			return "", ErrBadToken
		}
		v := byte(hi<<4 | lo)
		if plainByte(v) {
			return "", ErrBadToken // not canonical: Token never escapes it
		}
		b.WriteByte(v)
		i += 2
	}
	return b.String(), nil
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	}
	return -1
}
