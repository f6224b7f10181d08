package bench

import (
	"bytes"
	"context"
	"math"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want Stat
	}{
		{nil, Stat{}},
		{[]float64{5}, Stat{Min: 5, Median: 5, Max: 5, N: 1}},
		{[]float64{3, 1, 2}, Stat{Min: 1, Median: 2, Max: 3, N: 3}},
		{[]float64{4, 1, 3, 2}, Stat{Min: 1, Median: 2.5, Max: 4, N: 4}},
	} {
		if got := Summarize(tc.in); got != tc.want {
			t.Errorf("Summarize(%v) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestPercentile(t *testing.T) {
	var l Latencies
	for i := 100; i >= 1; i-- { // 1..100 ms, unsorted
		l = append(l, time.Duration(i)*time.Millisecond)
	}
	if got := l.P50(); got != 50*time.Millisecond {
		t.Errorf("p50 = %v, want 50ms", got)
	}
	if got := l.P99(); got != 99*time.Millisecond {
		t.Errorf("p99 = %v, want 99ms", got)
	}
	for _, tc := range []struct {
		n    int
		p    float64
		want time.Duration
	}{
		{1, 99, 1}, {2, 50, 1}, {2, 99, 2}, {10, 99, 10}, {1000, 99, 990},
	} {
		s := make([]time.Duration, tc.n)
		for i := range s {
			s[i] = time.Duration(i + 1)
		}
		if got := Percentile(s, tc.p); got != tc.want {
			t.Errorf("Percentile(1..%d, %v) = %v, want %v", tc.n, tc.p, got, tc.want)
		}
	}
	if Percentile(nil, 50) != 0 {
		t.Error("Percentile of nothing is not 0")
	}
}

func TestRatios(t *testing.T) {
	got := ratios([]float64{2, 3, 8}, []float64{1, 0, 4})
	if len(got) != 2 || got[0] != 2 || got[1] != 2 {
		t.Errorf("ratios = %v, want [2 2] (a zero limit is skipped)", got)
	}
}

func TestVerdicts(t *testing.T) {
	if AtMost(1.25, 1.25) != Pass || AtMost(1.26, 1.25) != Fail || AtLeast(0.7, 0.7) != Pass || AtLeast(0.69, 0.7) != Fail {
		t.Error("bounds are inclusive")
	}
	if Both(Pass, Pass) != Pass || Both(Pass, Fail) != Fail {
		t.Error("Both")
	}
}

func TestStatCell(t *testing.T) {
	for _, tc := range []struct {
		s    Stat
		u    Unit
		want string
	}{
		{Stat{}, Nanos, "—"},
		{Stat{Min: 17.5, Median: 18.25, Max: 19, N: 3}, Nanos, "18.2 ns (17.5–19.0)"},
		{Stat{Min: 1500, Median: 1800, Max: 2600, N: 3}, Nanos, "1.8 µs (1.5–2.6)"},
		{Stat{Min: 140e3, Median: 183e3, Max: 190e3, N: 3}, Nanos, "183 µs (140–190)"},
		{Stat{Min: 1.2e6, Median: 1.5e6, Max: 2e6, N: 3}, Nanos, "1.50 ms (1.20–2.00)"},
		{Stat{Min: 1700, Median: 1734.4, Max: 1800, N: 5}, PerSecond, "1734/s (1700–1800)"},
		{Stat{Min: 80, Median: 80, Max: 80, N: 3}, MiB, "80.0 MiB"},
		{Stat{Min: 21.5, Median: 22, Max: 22.25, N: 3}, Count, "22.0 (21.5–22.2)"},
		{Stat{Min: 900, Median: 950, Max: 1000, N: 3}, Bytes, "950 B (900–1000)"},
		{Stat{Min: 18 << 10, Median: 19 << 10, Max: 20 << 10, N: 3}, Bytes, "19.0 KiB (18.0–20.0)"},
	} {
		if got := statCell(tc.s, tc.u); got != tc.want {
			t.Errorf("statCell(%+v) = %q, want %q", tc.s, got, tc.want)
		}
	}
	if got := ratioCell(Stat{Min: 1.1, Median: 1.2, Max: 1.3, N: 3}); got != "1.20× (1.10–1.30)" {
		t.Errorf("ratioCell = %q", got)
	}
}

func TestBar(t *testing.T) {
	for _, tc := range []struct {
		done, total int
		want        string
	}{
		{0, 4, "[....]"}, {2, 4, "[##..]"}, {4, 4, "[####]"}, {9, 4, "[####]"}, {1, 0, "[####]"},
	} {
		if got := Bar(tc.done, tc.total, 4); got != tc.want {
			t.Errorf("Bar(%d, %d) = %q, want %q", tc.done, tc.total, got, tc.want)
		}
	}
	var buf bytes.Buffer
	p := NewProgress(&buf, 2)
	p.Step("one")
	p.Step("two")
	p.Finish()
	if lines := strings.Count(buf.String(), "\n"); lines != 3 || !strings.Contains(buf.String(), "100%") {
		t.Errorf("progress output (not a terminal: a line per step):\n%s", buf.String())
	}
	var none *Progress
	none.Step("nothing") // a nil bar draws nothing
}

func TestWriteMarkdown(t *testing.T) {
	r := &Report{
		Machine: Machine{CPUs: 2, Model: "Test CPU", MemMiB: 1024, OS: "linux/amd64", Go: "go1.26"},
		Date:    time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC), Commit: "abc123", Mode: "quick",
		LoadBefore: "0.10 0.20 0.30", LoadAfter: "1.00 0.50 0.40", Elapsed: 90 * time.Second,
		Tables: []Table{{Title: "Results", Rows: []Row{
			{ID: "P1", Figure: "dispatch", Value: Stat{Min: 17, Median: 18, Max: 19, N: 3}, Unit: Nanos, Extra: "0 allocs",
				LimitName: "pluggy", Goal: "≤ 60 ns/call, 0 allocs", Result: Pass},
			{ID: "P2", Figure: "hop | p50", Value: Stat{Min: 200e3, Median: 210e3, Max: 220e3, N: 3}, Unit: Nanos,
				LimitName: "raw", Limit: Stat{Min: 150e3, Median: 160e3, Max: 170e3, N: 3},
				Ratio: Stat{Min: 1.2, Median: 1.31, Max: 1.4, N: 3}, Goal: "≤ 1.25×", Result: Fail},
		}}},
		Sections: []Section{{Title: "Method", Body: "how"}},
	}
	var buf bytes.Buffer
	if err := r.WriteMarkdown(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"| 2 × Test CPU, 1024 MiB, linux/amd64, go1.26 | 2026-01-02 03:04 UTC | abc123 | quick | 0.10 0.20 0.30 → 1.00 0.50 0.40 | 1m30s |",
		"| P1 | dispatch | 18.0 ns (17.0–19.0), 0 allocs | pluggy | — | — | ≤ 60 ns/call, 0 allocs | pass |",
		`| P2 | hop \| p50 | 210 µs (200–220) | raw | 160 µs (150–170) | 1.31× (1.20–1.40) | ≤ 1.25× | **FAIL** |`,
		"## Method\n\nhow",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
	if f := r.Failed(); len(f) != 1 || f[0].ID != "P2" {
		t.Errorf("Failed() = %v", f)
	}
}

func TestSelected(t *testing.T) {
	got, err := selected(Options{Only: []string{"p3", " P1", "P3"}})
	if err != nil || strings.Join(got, ",") != "P1,P3" {
		t.Errorf("selected = %v, %v", got, err)
	}
	if _, err := selected(Options{Only: []string{"P9"}}); err == nil {
		t.Error("unknown figure accepted")
	}
	if got, _ := selected(Options{Quick: true}); strings.Join(got, ",") != "P1,P2,P3,P4,P5,P6,P7,P8" {
		t.Errorf("quick = %v", got)
	}
}

func TestSimParamsDescribe(t *testing.T) {
	p := simParams{InboundBytes: 500, Hops: []hop{{"before_llm_call", 3000}, {"after_llm_call", 3200}}, Events: 10, EventBytes: 800, OutboundBytes: 800, TapeMsgs: 18, TapeBytes: 490}
	want := "1 inbound publish 500 B, 2 request/replies 3000 B + 3200 B, 10 event publishes × 800 B, 1 outbound publish 800 B, recorder writing 18 tape messages × 490 B"
	if got := p.describe(); got != want {
		t.Errorf("describe = %q", got)
	}
	p.TapeHeader = nats.Header{"Content-Type": {"application/cloudevents+json"}}
	if got := p.describe(); got != want+" + header Content-Type" {
		t.Errorf("describe with a tape header = %q", got)
	}
}

func TestProcCPU(t *testing.T) {
	// The harness reads its children's CPU time from /proc; its own
	// process works the same way.
	if _, err := procCPU(1 << 30); err == nil {
		t.Error("a missing process has a CPU time")
	}
	if d := selfCPU(); d <= 0 {
		t.Errorf("selfCPU = %v", d)
	}
}

// TestRunQuickP1 runs the whole harness for P1 only: the report has its
// two rows, each measured.
func TestRunQuickP1(t *testing.T) {
	rep, err := Run(context.Background(), Options{Quick: true, Only: []string{"P1"}, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Tables) != 1 || len(rep.Tables[0].Rows) != 2 {
		t.Fatalf("tables = %+v", rep.Tables)
	}
	for _, r := range rep.Tables[0].Rows {
		if r.ID != "P1" || r.Value.N != 3 || r.Value.Median <= 0 || math.IsNaN(r.Value.Median) || r.Result == Info {
			t.Errorf("row %+v", r)
		}
	}
}

func TestAPIKind(t *testing.T) {
	for subject, want := range map[string]string{
		"$JS.API.CONSUMER.CREATE.KV_bub_turns.abc":        "JetStream API CONSUMER.CREATE",
		"$JS.API.STREAM.MSG.GET.BUB_STEER":                "JetStream API STREAM.MSG.GET",
		"$JS.API.DIRECT.GET.KV_bub_state.$KV.bub_state.k": "JetStream API DIRECT.GET",
		"$JS.API.CONSUMER.MSG.NEXT.BUB_INBOUND.workers":   "JetStream API CONSUMER.MSG.NEXT",
		"$JS.API.INFO": "JetStream API INFO",
	} {
		if got := apiKind(subject); got != want {
			t.Errorf("apiKind(%q) = %q, want %q", subject, got, want)
		}
	}
}

// TestHistoryKeepsEarlierRunsAndAddsThisOne: the History section of a
// written report is read back from it, and the next run appends its row
// after the earlier ones, each cell the quantity its goal is on.
func TestHistoryKeepsEarlierRunsAndAddsThisOne(t *testing.T) {
	var previous []byte // the report written last
	run := func(date time.Time, commit string, p3 float64) []byte {
		r := &Report{Date: date, Commit: commit, Mode: "full", Tables: []Table{{Title: "Results", Rows: []Row{
			{ID: "P2", Value: Stat{Median: 210e3, N: 3}, Unit: Nanos, Ratio: Stat{Median: 1.31, N: 3}, Goal: "≤ 1.25×", Result: Fail},
			{ID: "P2", Value: Stat{Median: 400e3, N: 3}, Unit: Nanos, Ratio: Stat{Median: 1.2, N: 3}, Goal: "≤ 1.5×", Result: Pass},
			{ID: "P3", Value: Stat{Median: 400, N: 3}, Unit: PerSecond, Ratio: Stat{Median: p3, N: 3}, Goal: "≥ 0.7×", Result: Fail},
			{ID: "P6", Value: Stat{Median: 186.6, N: 3}, Unit: MiB, Goal: "≤ 100 MiB", Result: Fail},
			{ID: "P8", Value: Stat{Median: 3.1e6, N: 3}, Unit: Nanos, Ratio: Stat{Median: 7.6, N: 3}, Over: Stat{Median: 2.69e6, N: 3}, Goal: "≤ relay + 2ms", Result: Fail},
		}}}}
		r.AddHistory(HistoryRows(previous))
		var buf bytes.Buffer
		if err := r.WriteMarkdown(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	previous = run(time.Date(2026, 12, 3, 17, 12, 0, 0, time.UTC), "574fda5edec5e96f6f463586ef6158eed2bbc52c", 0.23)
	second := run(time.Date(2026, 12, 4, 4, 30, 0, 0, time.UTC), "86e8986aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa+dirty", 0.25)
	rows := HistoryRows(second)
	if len(rows) != 2 {
		t.Fatalf("%d history rows, want 2:\n%s", len(rows), second)
	}
	for i, want := range []string{
		"| 2026-12-03 17:12 | 574fda5 | full | 1.31× ✗ | 1.20× | 0.23× ✗ | — |",
		"| 2026-12-04 04:30 | 86e8986+dirty | full | 1.31× ✗ | 1.20× | 0.25× ✗ | — |",
	} {
		if !strings.HasPrefix(rows[i], want) {
			t.Errorf("row %d = %s\nwant it to start %s", i, rows[i], want)
		}
		for _, cell := range []string{"| 186.6 MiB ✗ |", "| +2.69 ms ✗ |"} {
			if !strings.Contains(rows[i], cell) {
				t.Errorf("row %d lacks %q: %s", i, cell, rows[i])
			}
		}
	}
}

// TestStreamStartsSpreadOverATurn: P8's streams start one after another,
// evenly over ttftSpread, the first at once: never two at the same time,
// none after the spread.
func TestStreamStartsSpreadOverATurn(t *testing.T) {
	if streamStart(0) != 0 {
		t.Fatalf("the first stream starts after %v, want at once", streamStart(0))
	}
	gap := ttftSpread / ttftStreams
	for i := 1; i < ttftStreams; i++ {
		if d := streamStart(i) - streamStart(i-1); d != gap {
			t.Fatalf("stream %d starts %v after stream %d, want %v", i, d, i-1, gap)
		}
	}
	if last := streamStart(ttftStreams - 1); last >= ttftSpread {
		t.Fatalf("the last stream starts after %v, past the spread of %v", last, ttftSpread)
	}
}

// TestChildGOMAXPROCS: CPU1's layout starts every child with GOMAXPROCS=1;
// the others leave the child the harness's own environment.
func TestChildGOMAXPROCS(t *testing.T) {
	for _, tc := range []struct {
		procs int
		want  string
	}{{1, "1"}, {0, os.Getenv("GOMAXPROCS")}} {
		pl := &pipeline{opts: layoutOpts{procs: tc.procs}, roles: map[string][]*proc{}}
		m, err := pl.child(t.Context(), "probe", "probe", "/bin/sh", []string{"-c", `echo "procs=[$GOMAXPROCS]"; exec sleep 30`},
			nil, regexp.MustCompile(`procs=\[(.*)\]`))
		if err != nil {
			t.Fatal(err)
		}
		_ = pl.roles["probe"][0].stop()
		if m[1] != tc.want {
			t.Errorf("procs %d: the child's GOMAXPROCS is %q, want %q", tc.procs, m[1], tc.want)
		}
	}
}
