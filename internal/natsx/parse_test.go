package natsx

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseTags(t *testing.T) {
	for in, want := range map[string][]string{"": nil, " ": nil, "ssd": {"ssd"}, "ssd, az:eu-1 ,gpu": {"ssd", "az:eu-1", "gpu"}} {
		got, err := ParseTags(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseTags(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"ssd,", ",ssd", "a,,b", "fast disk"} {
		if got, err := ParseTags(in); err == nil {
			t.Errorf("ParseTags(%q) = %q, want an error", in, got)
		}
	}
}

func TestParseSync(t *testing.T) {
	for in, want := range map[string]struct {
		d      time.Duration
		always bool
	}{"": {}, "always": {always: true}, "ALWAYS": {always: true}, "1s": {d: time.Second}, " 250ms ": {d: 250 * time.Millisecond}} {
		d, always, err := ParseSync(in)
		if err != nil || d != want.d || always != want.always {
			t.Errorf("ParseSync(%q) = %v, %v, %v", in, d, always, err)
		}
	}
	for _, in := range []string{"never", "0s", "-1s", "1"} {
		if _, _, err := ParseSync(in); err == nil {
			t.Errorf("ParseSync(%q) accepted", in)
		}
	}
}

// FuzzParseTags: a parse never panics, and what it accepts is a list of
// non-empty tags without whitespace or commas that parses back the same.
func FuzzParseTags(f *testing.F) {
	for _, s := range []string{"", "ssd", "a, b", "a,,b", " x ,y", "\u00a0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tags, err := ParseTags(s)
		if err != nil {
			return
		}
		for _, tag := range tags {
			if tag == "" || strings.ContainsAny(tag, ", \t\n") {
				t.Fatalf("ParseTags(%q) accepted tag %q", s, tag)
			}
		}
		again, err := ParseTags(strings.Join(tags, ","))
		if err != nil || !slices.Equal(again, tags) {
			t.Fatalf("ParseTags(%q) = %q does not round-trip: %q, %v", s, tags, again, err)
		}
	})
}

// FuzzParseSync: a parse never panics; an accepted setting is always or
// a positive interval, never both.
func FuzzParseSync(f *testing.F) {
	for _, s := range []string{"", "always", "1s", "2m", "-1s", "0", "1h1m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, always, err := ParseSync(s)
		if err != nil {
			return
		}
		if d < 0 || (always && d != 0) || (strings.TrimSpace(s) != "" && !always && d == 0) {
			t.Fatalf("ParseSync(%q) = %v, %v", s, d, always)
		}
	})
}
