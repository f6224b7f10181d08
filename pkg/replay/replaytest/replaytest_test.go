package replaytest_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/bubbus/bub/pkg/replay/replaytest"
)

// spy is a testing.TB that keeps what Errorf said instead of failing.
type spy struct {
	testing.TB
	errors []string
}

func (s *spy) Errorf(format string, args ...any) {
	s.errors = append(s.errors, fmt.Sprintf(format, args...))
}

// Without the plugin that recorded it (opsbot), the session's second turn
// lacks a denial: Run fails the test with the diff.
func TestRunFailsOnADifference(t *testing.T) {
	s := &spy{TB: t}
	rep := replaytest.Run(s, "../../../examples/plugins/opsbot/testdata/session.jsonl")
	if rep.Identical() || len(s.errors) != 1 || !strings.Contains(s.errors[0], "-step 1 before_tool_call opsbot deny") {
		t.Fatalf("identical %v, errors %q; want one error with the missing denial", rep.Identical(), s.errors)
	}
}
