package toolkit

import (
	"errors"
	"testing"
)

// TestNoShellStillStarts: a worker in a container without a shell (the
// FROM scratch compose image) starts; only shell commands fail, with
// ErrNoShell.
func TestNoShellStillStarts(t *testing.T) {
	t.Setenv("PATH", "")
	s, err := NewShells()
	if err != nil {
		t.Fatalf("NewShells without a shell: %v", err)
	}
	defer s.Close()
	if _, err := s.start("true", "", "s"); !errors.Is(err, ErrNoShell) {
		t.Fatalf("start = %v, want ErrNoShell", err)
	}
}
