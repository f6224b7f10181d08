package tools

import (
	"context"

	"github.com/bubbus/bub/pkg/tape"
)

// Tape is the session tape as tools see it: the run's view (committed
// entries plus what the run recorded so far). Writes are recorded with the
// run; in a worker they reach the stored tape when the run is committed.
type Tape interface {
	Info(ctx context.Context) (tape.Info, error)
	Search(ctx context.Context, s tape.Search) (tape.SearchResult, error)
	Anchors(ctx context.Context, limit int) ([]tape.AnchorSummary, error)
	Handoff(ctx context.Context, name string, state map[string]any) error
	// Reset empties the tape (keeping an archive when asked) and returns
	// the tape.reset tool's answer.
	Reset(ctx context.Context, archive bool) (string, error)
	AppendEvent(ctx context.Context, name string, data map[string]any) error
}
