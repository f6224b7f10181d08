package jsonesc

import "unicode/utf8"

// Options are the choices JSON leaves to an encoder that Bub's hand-written
// encoders must make as the encoder they match does. The zero Options
// escape as the CloudEvents SDK (jsoniter, fastest configuration) does.
type Options struct {
	// ShortBF writes backspace and form feed as \b and \f, as Python's
	// json module does, instead of \u0008 and \u000c.
	ShortBF bool
	// FixUTF8 writes each byte of invalid UTF-8 as U+FFFD, as Python
	// (whose strings cannot hold invalid UTF-8) and encoding/json do;
	// without it every byte from 0x80 up is copied as it is.
	FixUTF8 bool
	// StdEscapes (with FixUTF8) writes what FixUTF8 replaces as \ufffd,
	// and U+2028 and U+2029 (line breaks to JavaScript) as \u2028 and
	// \u2029, as encoding/json does.
	StdEscapes bool
}

// SDK escapes as the CloudEvents SDK's encoder (jsoniter, fastest
// configuration) does.
var SDK = Options{}

// Std escapes as encoding/json does with HTML escaping off.
var Std = Options{ShortBF: true, FixUTF8: true, StdEscapes: true}

// Python escapes as json.dumps(s, ensure_ascii=False) does.
var Python = Options{ShortBF: true, FixUTF8: true}

const hexDigits = "0123456789abcdef"

// Append appends s to b as a JSON string: '"', '\\' and the control
// characters U+0000 to U+001F escaped (\n, \r and \t in their short form),
// everything else as it is but for what the options say (no HTML
// escaping, no \u escapes of other non-ASCII characters).
func (o Options) Append(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0 // s[start:i] is still to be copied
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			if !o.FixUTF8 {
				i++
				continue
			}
			r, size := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == utf8.RuneError && size == 1:
				b = append(b, s[start:i]...)
				if o.StdEscapes {
					b = append(b, `\ufffd`...)
				} else {
					b = utf8.AppendRune(b, utf8.RuneError)
				}
				start = i + 1
			case (r == '\u2028' || r == '\u2029') && o.StdEscapes:
				b = append(b, s[start:i]...)
				b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
				start = i + size
			}
			i += size
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		b = append(b, s[start:i]...)
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c == '\t':
			b = append(b, '\\', 't')
		case c == '\b' && o.ShortBF:
			b = append(b, '\\', 'b')
		case c == '\f' && o.ShortBF:
			b = append(b, '\\', 'f')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
