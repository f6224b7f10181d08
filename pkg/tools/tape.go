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

// Spawner runs a subagent (the subagent tool): a nested agent run on its
// own session, returning its text output.
type Spawner interface {
	Spawn(ctx context.Context, req SpawnRequest) (string, error)
}

// TempSessionPrefix starts the ids of temporary sessions (a subagent's
// fresh session), whose runs are never recorded (Bub never merges their
// forks).
const TempSessionPrefix = "temp/"

// SpawnRequest describes one subagent run.
type SpawnRequest struct {
	Prompt string
	// Model overrides the parent's model when non-empty.
	Model string
	// Session is the subagent's session id (sessions under
	// [TempSessionPrefix] are never recorded).
	Session string
	// AllowedTools limits the subagent's tools (runtime names); nil = all.
	AllowedTools []string
	// AllowedSkills limits the skills it may use; nil = all.
	AllowedSkills []string
}
