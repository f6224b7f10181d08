package turnload

import "testing"

func TestFromEnv(t *testing.T) {
	def := Load{Turns: 500, Sessions: 50, Rate: 10}
	if l := FromEnv(t, "BUB_TL", def); l != def {
		t.Errorf("no variables: %+v, want %+v", l, def)
	}
	t.Setenv("BUB_TL_TURNS", "200")
	t.Setenv("BUB_TL_SESSIONS", "20")
	t.Setenv("BUB_TL_RATE", "2.5")
	if l, want := FromEnv(t, "BUB_TL", def), (Load{Turns: 200, Sessions: 20, Rate: 2.5}); l != want {
		t.Errorf("%+v, want %+v", l, want)
	}
}

func TestResultClean(t *testing.T) {
	ok := Result{Sent: 3, Replied: 3, TapeExpected: 3, TapeFound: 3}
	if !ok.Clean() {
		t.Errorf("%v: not clean", ok)
	}
	for name, r := range map[string]Result{
		"lost":           {Sent: 3, Replied: 2, Lost: 1, TapeExpected: 3, TapeFound: 3},
		"duplicate":      {Sent: 3, Replied: 3, Duplicates: 1, TapeExpected: 3, TapeFound: 3},
		"tape duplicate": {Sent: 3, Replied: 3, TapeExpected: 3, TapeFound: 3, TapeDuplicates: 1},
		"tape missing":   {Sent: 3, Replied: 3, TapeExpected: 3, TapeFound: 2},
	} {
		if r.Clean() {
			t.Errorf("%s: %v counts as clean", name, r)
		}
	}
}
