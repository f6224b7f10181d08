package bubcmd

import "testing"

// A step streamed again by a resumed run (offset back at 0) shows only
// what was not shown before; another step or turn shows in full.
func TestStreamedTextShowsAResumedStepOnce(t *testing.T) {
	var s streamedText
	steps := []struct {
		d    streamDelta
		want string
	}{
		{streamDelta{Turn: "t1", Step: 1, Offset: 0, Text: "Hel"}, "Hel"},
		{streamDelta{Turn: "t1", Step: 1, Offset: 3, Text: "lo "}, "lo "},
		// the worker died; the resumed run calls the model again
		{streamDelta{Turn: "t1", Step: 1, Offset: 0, Text: "Hel"}, ""},
		{streamDelta{Turn: "t1", Step: 1, Offset: 3, Text: "lo wo"}, "wo"},
		{streamDelta{Turn: "t1", Step: 1, Offset: 8, Text: "rld"}, "rld"},
		{streamDelta{Turn: "t1", Step: 2, Offset: 0, Text: "next"}, "next"},
		{streamDelta{Turn: "t2", Step: 1, Offset: 0, Text: "Hel"}, "Hel"},
	}
	for i, st := range steps {
		if got := s.unseen(st.d); got != st.want {
			t.Errorf("delta %d %+v: shown %q, want %q", i, st.d, got, st.want)
		}
	}
}
