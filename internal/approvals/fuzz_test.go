package approvals

import (
	"errors"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeAnswer: any body decodes to a valid answer or fails with
// ErrBadAnswer and a message; never a panic.
func FuzzDecodeAnswer(f *testing.F) {
	for _, s := range []string{
		`{"decision": "approve"}`, `{"decision": "deny", "reason": "not on prod"}`,
		`{"id": "0123456789abcdef0123456789abcdef", "decision": "approve"}`, `{"id": "x", "decision": "deny"}`,
		`{"decision": "maybe"}`, `{"decision": "approve", "extra": 1}`, `{"decision": "approve"} {}`,
		`{"reason": "\ud800", "decision": "deny"}`, `[]`, `null`, ``, `{"decision": null}`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, needID bool) {
		a, err := DecodeAnswer(data, needID)
		if err != nil {
			if !errors.Is(err, ErrBadAnswer) || err.Error() == ErrBadAnswer.Error() {
				t.Fatalf("error %v for %q", err, data)
			}
			return
		}
		if a.Decision != "approve" && a.Decision != "deny" || len(a.Reason) > MaxReason || !utf8.ValidString(a.Reason) || needID != (a.ID != "") || needID && !ValidID(a.ID) {
			t.Fatalf("accepted %+v for %q (needID %v)", a, data, needID)
		}
	})
}
