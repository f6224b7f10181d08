package approvals

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/bubbus/bub/pkg/events"
)

// MaxReason bounds an answer's reason, in bytes.
const MaxReason = 4096

// Answer is a person's answer to an approval, as HTTP and NATS carry it:
// {"decision": "approve"|"deny", "reason": "…"}; a NATS request also
// names the approval: {"id": "…", …}.
type Answer struct {
	ID       string `json:"id,omitempty"`
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
}

// Approve reports whether a approves.
func (a Answer) Approve() bool { return a.Decision == events.ApprovalApprove }

// ErrBadAnswer wraps every reason [DecodeAnswer] refuses a body.
var ErrBadAnswer = errors.New("invalid answer")

// DecodeAnswer decodes and checks an answer body: one JSON object with
// known fields only, a decision of approve or deny, a reason of valid
// UTF-8 of at most MaxReason bytes, and an id only when needID (then
// required).
func DecodeAnswer(data []byte, needID bool) (Answer, error) {
	var a Answer
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return Answer{}, fmt.Errorf("%w: %v", ErrBadAnswer, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Answer{}, fmt.Errorf("%w: trailing data after the answer object", ErrBadAnswer)
	}
	switch {
	case a.Decision != events.ApprovalApprove && a.Decision != events.ApprovalDeny:
		return Answer{}, fmt.Errorf("%w: decision %q: want approve or deny", ErrBadAnswer, a.Decision)
	case len(a.Reason) > MaxReason:
		return Answer{}, fmt.Errorf("%w: reason is %d bytes, at most %d", ErrBadAnswer, len(a.Reason), MaxReason)
	case !utf8.ValidString(a.Reason):
		return Answer{}, fmt.Errorf("%w: reason is not valid UTF-8", ErrBadAnswer)
	case needID && a.ID == "":
		return Answer{}, fmt.Errorf("%w: id is required", ErrBadAnswer)
	case !needID && a.ID != "":
		return Answer{}, fmt.Errorf("%w: the id is the URL's, not the body's", ErrBadAnswer)
	case needID && !ValidID(a.ID):
		return Answer{}, fmt.Errorf("%w: id %q is not an approval id", ErrBadAnswer, a.ID)
	}
	return a, nil
}

// ValidID reports whether id has the form of an approval id
// (events.ApprovalID: 32 lowercase hex digits).
func ValidID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for _, c := range []byte(id) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
