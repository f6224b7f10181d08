package jsonesc

import (
	"math"
	"strconv"
)

// AppendFloat appends the finite number f as encoding/json writes a
// float64: integral values without a fraction or exponent, the shortest
// form that reads back as f, and an exponent (without a leading zero:
// 1e-9, not 1e-09) only below 1e-6 or from 1e21 up. NaN and infinities
// are not JSON; the caller decides what they become.
func AppendFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
