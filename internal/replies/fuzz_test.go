package replies

import (
	"slices"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to the done-marker decoder: it never
// panics, whatever it accepts has a reply list of valid references, and
// encoding it again decodes to the same marker.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"at":"2026-12-01T15:00:00Z","replies":[{"stream":"BUB_OUTBOUND","seq":12}]}`))
	f.Add([]byte(`{"at":"2026-12-01T15:00:00Z","replies":[]}`))
	f.Add([]byte(`{"at":"2026-12-01T15:00:00Z","replies":null}`))
	f.Add([]byte(`{"replies":[{"stream":"S","seq":0}]}`))
	f.Add([]byte(`2026-12-01T15:00:00.123Z`))
	f.Add([]byte("\x00{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Decode(data)
		if err != nil {
			return
		}
		if d.Replies == nil {
			t.Fatalf("accepted %q without a reply list", data)
		}
		for _, r := range d.Replies {
			if r.Stream == "" || r.Seq == 0 {
				t.Fatalf("accepted %q with reference %+v", data, r)
			}
		}
		raw, err := d.Encode()
		if err != nil {
			t.Fatalf("re-encoding %+v: %v", d, err)
		}
		again, err := Decode(raw)
		if err != nil || !again.At.Equal(d.At) || !slices.Equal(again.Replies, d.Replies) {
			t.Fatalf("%q re-encoded as %s decodes to %+v, %v", data, raw, again, err)
		}
	})
}
