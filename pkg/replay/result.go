package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/bubbus/bub/pkg/tape"
)

// Result is what replaying one turn showed.
type Result struct {
	// RunID is the recorded run's id.
	RunID string
	// Recorded and Replayed are the two renderings ([Lines]).
	Recorded, Replayed []Line
	// Divergences are the places where this build left the recording:
	// a tool call or a model call the recording has no answer for.
	Divergences []string
	// Err is set when the turn could not be replayed at all (a recording
	// that does not decode, a tape that cannot be read back).
	Err error
}

// Matches reports whether both renderings agree on section.
func (r Result) Matches(section string) bool {
	return slices.Equal(of(r.Recorded, section), of(r.Replayed, section))
}

// Identical reports whether the turn replayed exactly as recorded.
func (r Result) Identical() bool {
	return r.Err == nil && len(r.Divergences) == 0 && r.Matches(SectionOutbound) && r.Matches(SectionTools) && r.Matches(SectionDecisions)
}

// Diff is the unified diff of the two renderings, section by section
// ("" when they agree).
func (r Result) Diff() string {
	var b strings.Builder
	for _, s := range []string{SectionOutbound, SectionTools, SectionDecisions} {
		if r.Matches(s) {
			continue
		}
		d, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
			A: lines(of(r.Recorded, s)), B: lines(of(r.Replayed, s)),
			FromFile: "recorded " + s, ToFile: "replayed " + s, Context: 2,
		})
		b.WriteString(d)
	}
	return b.String()
}

func of(ls []Line, section string) []string {
	var out []string
	for _, l := range ls {
		if l.Section == section {
			out = append(out, l.Text)
		}
	}
	return out
}

func lines(texts []string) []string {
	out := make([]string, len(texts))
	for i, t := range texts {
		out[i] = t + "\n"
	}
	return out
}

// Report is the replay of a session's turns.
type Report struct {
	Session string
	Results []Result
}

// Identical reports whether every turn replayed as recorded.
func (r Report) Identical() bool {
	for _, res := range r.Results {
		if !res.Identical() {
			return false
		}
	}
	return true
}

// Write prints, per turn, whether its outbound text, tool calls and hook
// decisions match, each divergence, and the unified diff of what differs;
// then a summary line.
func (r Report) Write(w io.Writer) error {
	same := 0
	for i, res := range r.Results {
		mark := func(section string) string {
			if res.Matches(section) {
				return section + " match"
			}
			return section + " DIFFER"
		}
		fmt.Fprintf(w, "turn %d/%d run %s: %s, %s, %s\n", i+1, len(r.Results), res.RunID,
			mark(SectionOutbound), mark(SectionTools), mark(SectionDecisions))
		if res.Err != nil {
			fmt.Fprintf(w, "  not replayed: %v\n", res.Err)
		}
		for _, d := range res.Divergences {
			fmt.Fprintf(w, "  divergence: %s\n", d)
		}
		if d := res.Diff(); d != "" {
			fmt.Fprint(w, d)
		}
		if res.Identical() {
			same++
		}
	}
	_, err := fmt.Fprintf(w, "%s: %d turns, %d identical, %d differ\n", r.Session, len(r.Results), same, len(r.Results)-same)
	return err
}

// Session replays every turn of a session's tape entries with a
// [Replayer] of o, in order; each turn starts from its recorded context.
func Session(ctx context.Context, session string, entries []tape.Entry, o Options) (rep Report, err error) {
	turns, err := Turns(entries)
	if err != nil {
		return Report{}, err
	}
	r, err := New(ctx, o)
	if err != nil {
		return Report{}, err
	}
	defer func() { err = errors.Join(err, r.Close(context.WithoutCancel(ctx))) }()
	rep.Session = session
	for _, t := range turns {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		rep.Results = append(rep.Results, r.Replay(ctx, session, t))
	}
	return rep, nil
}

// File replays the Bub JSONL tape at path (as `bub tape export` writes
// it) with o; the session is the file's name without its extension.
func File(ctx context.Context, path string, o Options) (Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return Report{}, err
	}
	defer f.Close()
	entries, err := tape.ReadJSONL(f)
	if err != nil {
		return Report{}, fmt.Errorf("replay: %s: %w", path, err)
	}
	session := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	return Session(ctx, session, entries, o)
}
