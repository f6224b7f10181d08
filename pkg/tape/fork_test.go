package tape_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tape"
)

func contentsOf(entries []tape.Entry) []string {
	var out []string
	for _, e := range entries {
		switch e.Kind {
		case tape.KindAnchor:
			name, _ := e.AnchorName()
			out = append(out, "#"+name)
		default:
			out = append(out, pyStr(e.Payload["content"]))
		}
	}
	return out
}

func pyStr(v any) string {
	s, _ := v.(string)
	return s
}

func fetchContents(t *testing.T, s tape.Store, q tape.Query) []string {
	t.Helper()
	got, err := s.Fetch(t.Context(), "t", q)
	if err != nil {
		t.Fatal(err)
	}
	return contentsOf(got)
}

func TestForkReadsParentThenPending(t *testing.T) {
	parent := tape.NewMemoryStore()
	ctx := t.Context()
	if _, err := parent.Append(ctx, "t", []tape.Entry{user("p1"), tape.Anchor("a", nil), user("p2")}); err != nil {
		t.Fatal(err)
	}
	fork := tape.NewFork(parent)
	stored, err := fork.Append(ctx, "t", []tape.Entry{user("f1"), user("f2")})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(stored); !reflect.DeepEqual(got, []int64{4, 5}) {
		t.Fatalf("provisional ids %v, want 4 5", got)
	}
	tests := []struct {
		name string
		q    tape.Query
		want []string
	}{
		{"all", tape.All(), []string{"p1", "#a", "p2", "f1", "f2"}},
		{"last anchor in parent", tape.All().LastAnchor(), []string{"p2", "f1", "f2"}},
		{"text filters pending entries too", tape.All().Text("f2"), []string{"f2"}},
		{"limit over both", tape.All().LastAnchor().Limit(2), []string{"p2", "f1"}},
		{"kinds", tape.All().Kinds(tape.KindAnchor), []string{"#a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fetchContents(t, fork, tt.q); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}

	// Behaviour check 69: the parent sees nothing of the fork.
	if got := fetchContents(t, parent, tape.All()); !reflect.DeepEqual(got, []string{"p1", "#a", "p2"}) {
		t.Fatalf("parent holds %q", got)
	}
	if got := contentsOf(fork.Pending("t")); !reflect.DeepEqual(got, []string{"f1", "f2"}) || fork.WasReset("t") {
		t.Fatalf("pending %q reset %v", got, fork.WasReset("t"))
	}

	// A pending anchor starts the context: the parent part disappears.
	if _, err := fork.Append(ctx, "t", []tape.Entry{tape.Anchor("b", nil), user("f3")}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		q    tape.Query
		want []string
	}{
		{tape.All().LastAnchor(), []string{"f3"}},
		{tape.All().AfterAnchor("b"), []string{"f3"}},
		{tape.All().AfterAnchor("a"), []string{"p2", "f1", "f2", "#b", "f3"}},
		{tape.All().BetweenAnchors("a", "b"), []string{"p2", "f1", "f2"}},
	} {
		if got := fetchContents(t, fork, tt.q); !reflect.DeepEqual(got, tt.want) {
			t.Fatalf("got %q, want %q", got, tt.want)
		}
	}
	_, err = fork.Fetch(ctx, "t", tape.All().BetweenAnchors("b", "a"))
	var be *bub.Error
	if !errors.As(err, &be) || be.Message != "Anchor 'a' was not found." {
		t.Fatalf("between with a missing end: %v", err)
	}

	ix, err := fork.Index(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if last, _ := ix.LastAnchor(); ix.Entries != 7 || ix.LastID != 7 || ix.Anchors != 2 || last.Name != "b" || ix.EntriesSinceLastAnchor() != 1 {
		t.Fatalf("fork index %+v", ix)
	}
}

func TestForkReset(t *testing.T) {
	// Behaviour check 71: during the fork only the new entries show; the
	// parent keeps its old ones.
	parent := tape.NewMemoryStore()
	ctx := t.Context()
	if _, err := parent.Append(ctx, "t", []tape.Entry{user("old"), tape.Anchor("a", nil)}); err != nil {
		t.Fatal(err)
	}
	fork := tape.NewFork(parent)
	if _, err := fork.Append(ctx, "t", []tape.Entry{user("before reset")}); err != nil {
		t.Fatal(err)
	}
	if err := fork.Reset(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	stored, err := fork.Append(ctx, "t", []tape.Entry{user("new")})
	if err != nil {
		t.Fatal(err)
	}
	if stored[0].ID != 1 || !fork.WasReset("t") {
		t.Fatalf("after a fork reset: id %d, WasReset %v", stored[0].ID, fork.WasReset("t"))
	}
	if got := fetchContents(t, fork, tape.All()); !reflect.DeepEqual(got, []string{"new"}) {
		t.Fatalf("fork shows %q", got)
	}
	if _, err := fork.Fetch(ctx, "t", tape.All().LastAnchor()); err == nil {
		t.Fatal("the parent's anchor is visible after a reset in the fork")
	}
	if got := fetchContents(t, parent, tape.All()); !reflect.DeepEqual(got, []string{"old", "#a"}) {
		t.Fatalf("parent holds %q", got)
	}
	names, err := fork.List(ctx)
	if err != nil || !reflect.DeepEqual(names, []string{"t"}) {
		t.Fatalf("List = %v, %v", names, err)
	}
}

func TestForkStripsMedia(t *testing.T) {
	fork := tape.NewFork(tape.NewMemoryStore())
	msg := llm.Message{Role: "user", Content: llm.Content{Parts: []llm.Part{
		{Type: "text", Text: "look"},
		{Type: "image_url", ImageURL: &llm.URLPart{URL: "data:image/png;base64,AAAA"}},
	}}}
	stored, err := fork.Append(t.Context(), "t", []tape.Entry{tape.MessageEntry(msg)})
	if err != nil {
		t.Fatal(err)
	}
	want := []any{map[string]any{"type": "text", "text": "look"}}
	if !reflect.DeepEqual(stored[0].Payload["content"], want) {
		t.Fatalf("content %#v, want only the text part", stored[0].Payload["content"])
	}
}

// failingStore fails every read, like an unreachable store.
type failingStore struct{ tape.Store }

var errDown = errors.New("store down")

func (failingStore) Fetch(context.Context, string, tape.Query) ([]tape.Entry, error) {
	return nil, errDown
}

func TestForkReportsParentFailures(t *testing.T) {
	fork := tape.NewFork(failingStore{tape.NewMemoryStore()})
	if _, err := fork.Fetch(t.Context(), "t", tape.All()); !errors.Is(err, errDown) {
		t.Fatalf("Fetch = %v, want the parent's error", err)
	}
}

func TestForkWatermarksWaitOnParent(t *testing.T) {
	parent := tape.NewMemoryStore()
	fork := tape.NewFork(parent)
	done := make(chan error, 1)
	go func() {
		ix, err := fork.WaitWatermark(t.Context(), "t", "events", 5)
		if err == nil && ix.Watermark("events") < 5 {
			err = errors.New("returned before the watermark")
		}
		done <- err
	}()
	if _, err := parent.Append(t.Context(), "t", nil, tape.WithWatermark("events", 5)); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := fork.WaitWatermark(ctx, "t", "events", 6); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitWatermark past its deadline: %v", err)
	}
}

func TestNestedForks(t *testing.T) {
	parent := tape.NewMemoryStore()
	if _, err := parent.Append(t.Context(), "t", []tape.Entry{tape.Anchor("s", nil), user("p")}); err != nil {
		t.Fatal(err)
	}
	outer := tape.NewFork(parent)
	if _, err := outer.Append(t.Context(), "t", []tape.Entry{user("outer")}); err != nil {
		t.Fatal(err)
	}
	inner := tape.NewFork(outer)
	stored, err := inner.Append(t.Context(), "t", []tape.Entry{user("inner")})
	if err != nil || stored[0].ID != 4 {
		t.Fatalf("inner id %v, %v", ids(stored), err)
	}
	msgs, err := tape.New(inner, "t", tape.Context{}).ReadMessages(t.Context())
	if err != nil || len(msgs) != 3 || msgs[2].Content.Text != "inner" {
		t.Fatalf("nested context %v, %v", msgs, err)
	}
	if inner.Unwrap() != outer || len(outer.Pending("t")) != 1 {
		t.Fatal("the inner fork wrote its parent")
	}
}

// indexCounter counts the parent's index reads.
type indexCounter struct {
	tape.Store
	reads int
}

func (c *indexCounter) Index(ctx context.Context, name string) (tape.Index, error) {
	c.reads++
	return c.Store.(tape.Indexer).Index(ctx, name)
}

// TestForkNumbersFromItsLastIndexRead: a run reads its tape's index
// before its first write (the bootstrap-anchor check), so that write
// numbers its entries from the newest read, not from a read of its own:
// one round trip to the store fewer per run.
func TestForkNumbersFromItsLastIndexRead(t *testing.T) {
	ctx := t.Context()
	mem := tape.NewMemoryStore()
	parent := &indexCounter{Store: mem}
	if _, err := mem.Append(ctx, "t", []tape.Entry{user("p1")}); err != nil {
		t.Fatal(err)
	}
	fork := tape.NewFork(parent)
	if _, err := fork.Index(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	// The parent grows (another run was committed) and the fork reads
	// the index again before it writes.
	if _, err := mem.Append(ctx, "t", []tape.Entry{user("p2")}); err != nil {
		t.Fatal(err)
	}
	if _, err := fork.Index(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	stored, err := fork.Append(ctx, "t", []tape.Entry{user("f1")})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(stored); !reflect.DeepEqual(got, []int64{3}) {
		t.Fatalf("provisional ids %v, want 3 (after the newest read's last id 2)", got)
	}
	if parent.reads != 2 {
		t.Fatalf("the parent's index was read %d times, want 2 (the append reads it no more)", parent.reads)
	}
	// Without an earlier read the append reads the index itself.
	other := tape.NewFork(parent)
	if stored, err = other.Append(ctx, "t", []tape.Entry{user("g1")}); err != nil {
		t.Fatal(err)
	}
	if got := ids(stored); parent.reads != 3 || !reflect.DeepEqual(got, []int64{3}) {
		t.Fatalf("ids %v after %d reads, want 3 after 3", got, parent.reads)
	}
}

// TestForkSeedServesItsNextIndexOnly: a seeded index answers the fork's
// next Index of its tape (extended by the pending entries, numbering the
// fork's appends) without a read of the parent; the one after reads the
// parent again, and other tapes never use it.
func TestForkSeedServesItsNextIndexOnly(t *testing.T) {
	ctx := t.Context()
	mem := tape.NewMemoryStore()
	parent := &indexCounter{Store: mem}
	if _, err := mem.Append(ctx, "t", []tape.Entry{user("p1"), user("p2")}); err != nil {
		t.Fatal(err)
	}
	seed, err := mem.Index(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	fork := tape.NewFork(parent)
	fork.Seed("t", seed)
	if _, err := mem.Append(ctx, "t", []tape.Entry{user("p3")}); err != nil {
		t.Fatal(err)
	}
	if _, err := fork.Index(ctx, "other"); err != nil || parent.reads != 1 {
		t.Fatalf("another tape's index: %v after %d parent reads, want a read of its own", err, parent.reads)
	}
	ix, err := fork.Index(ctx, "t")
	if err != nil || parent.reads != 1 || ix.LastID != 2 {
		t.Fatalf("seeded index: last id %d (%v) after %d parent reads, want the seed's 2 and no read", ix.LastID, err, parent.reads)
	}
	stored, err := fork.Append(ctx, "t", []tape.Entry{user("f1")})
	if err != nil || !reflect.DeepEqual(ids(stored), []int64{3}) {
		t.Fatalf("provisional ids %v (%v), want 3 (after the seed's last id)", ids(stored), err)
	}
	if _, err = fork.Index(ctx, "t"); err != nil || parent.reads != 2 {
		t.Fatalf("second index: %v after %d parent reads, want a read of the parent", err, parent.reads)
	}
}

// TestWithoutResult: a store that returns copies of what it keeps returns
// nil instead, also for a replayed commit id, and stores the batch as
// without the option.
func TestWithoutResult(t *testing.T) {
	ctx := t.Context()
	parent := tape.NewMemoryStore()
	for name, s := range map[string]tape.Store{"memory": parent, "fork": tape.NewFork(parent)} {
		t.Run(name, func(t *testing.T) {
			for range 2 { // the second one replays the commit id
				got, err := s.Append(ctx, "t", []tape.Entry{user("x-" + name)}, tape.WithCommitID("c-"+name), tape.WithoutResult())
				if err != nil || got != nil {
					t.Fatalf("Append = %v, %v; want nil, nil", got, err)
				}
			}
			all := fetchContents(t, s, tape.Query{})
			if all[len(all)-1] != "x-"+name || slices.Index(all, "x-"+name) != len(all)-1 {
				t.Fatalf("tape %v, want x-%s stored once, last", all, name)
			}
		})
	}
}

// TestReadsWhileAppendingInPlace: MemoryStore and Fork append in place
// while readers hold earlier views of their entries (run with -race);
// every read sees a prefix of what was appended, in order, and a reader
// may append to what it got.
func TestReadsWhileAppendingInPlace(t *testing.T) {
	ctx := t.Context()
	for name, s := range map[string]tape.Store{"memory": tape.NewMemoryStore(), "fork": tape.NewFork(tape.NewMemoryStore())} {
		t.Run(name, func(t *testing.T) {
			const n = 200
			var wg sync.WaitGroup
			wg.Go(func() {
				for i := range n {
					if _, err := s.Append(ctx, "t", []tape.Entry{user(strconv.Itoa(i))}, tape.WithoutResult()); err != nil {
						t.Error(err)
						return
					}
				}
			})
			for _, q := range []tape.Query{tape.All(), tape.All().Kinds(tape.KindMessage), tape.All().Limit(5)} {
				wg.Go(func() {
					for range n {
						got, err := s.Fetch(ctx, "t", q)
						if err != nil {
							t.Error(err)
							return
						}
						for i, c := range contentsOf(got) {
							if c != strconv.Itoa(i) {
								t.Errorf("read %v: entry %d is %q", contentsOf(got), i, c)
								return
							}
						}
						_ = append(got, user("mine"))
					}
				})
			}
			wg.Wait()
			if got := fetchContents(t, s, tape.All()); len(got) != n {
				t.Fatalf("%d entries after the appends, want %d", len(got), n)
			}
		})
	}
}
