package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Figure ids accepted by [Options.Only]: the P1–P8 (P3 with its
// stored-messages rows, P6 with its HTTP/1.1 row), UP (the all-in-one
// layout's P3 and P4), SCALE (turns/s with 1, 2 and 4 worker processes),
// CLUSTER (P3 and P4 on a 3-node R3 cluster), SYNC (P3 with
// BUB_JS_SYNC=always) and CPU1 (P3 and P4 with GOMAXPROCS=1 in every
// process).
var Figures = []string{"P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8", "UP", "SCALE", "CLUSTER", "SYNC", "CPU1"}

// quickFigures are what --quick runs: the main table (CLUSTER, SYNC, UP,
// SCALE and CPU1 are full-run only).
var quickFigures = []string{"P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8"}

// Options configures [Run].
type Options struct {
	// Quick runs the main table with short windows (about 3 minutes).
	Quick bool
	// Only limits the run to these figure ids (see [Figures]); empty runs
	// every figure (Quick: the main table).
	Only []string
	// Self is the bub binary, started for the NATS server and the hidden
	// roles (`bub bench --serve`).
	Self string
	// BinDir holds the service binaries (worker, recorder, ingress).
	BinDir string
	// Progress receives the progress bar (nil = none).
	Progress io.Writer
	// TempDir is where servers keep their data ("" = the system's).
	TempDir string
	// RepoDir is where the commit is read ("" = the working directory).
	RepoDir string
}

// config is the size of a run.
type config struct {
	reps int
	// benchTime is testing.Benchmark's time per repetition (P1, P5).
	benchTime time.Duration
	// hopSamples is the requests per repetition (P2).
	hopSamples int
	// warmup is the warm-up of every load phase.
	warmup time.Duration
	// window is one closed-loop repetition (P3); latencyWindow one
	// fixed-rate repetition (P4) at rate turns/s.
	window, latencyWindow time.Duration
	rate                  int
	// inflight is the closed loop's concurrency; workerConcurrency the
	// workers' (real and simulated).
	inflight, workerConcurrency int
	// tapeEntries is the large tape of P5.
	tapeEntries int
	// rssTurns are the turns in flight of P6, the model answering after
	// rssDelay.
	rssTurns int
	rssDelay time.Duration
	// events is the publishes per repetition of P7.
	events int
}

func configFor(quick bool) config {
	if quick {
		return config{reps: 3, benchTime: 200 * time.Millisecond, hopSamples: 1500, warmup: time.Second,
			window: 2 * time.Second, latencyWindow: 3 * time.Second, rate: 200, inflight: 64, workerConcurrency: 256,
			tapeEntries: 100_000, rssTurns: 1000, rssDelay: 2 * time.Second, events: 20_000}
	}
	return config{reps: 5, benchTime: time.Second, hopSamples: 5000, warmup: 2 * time.Second,
		window: 5 * time.Second, latencyWindow: 8 * time.Second, rate: 200, inflight: 64, workerConcurrency: 256,
		tapeEntries: 100_000, rssTurns: 1000, rssDelay: 2 * time.Second, events: 100_000}
}

// env is the state of one run.
type env struct {
	opts     Options
	cfg      config
	progress *Progress
	tmp      string
}

var errBenchmarkFailed = errors.New("benchmark failed")

// Run measures the selected figures and returns the report. A figure that
// cannot be measured (a child process failing, a timeout) ends the run
// with an error; a missed goal does not.
func Run(ctx context.Context, o Options) (*Report, error) {
	want, err := selected(o)
	if err != nil {
		return nil, err
	}
	e := &env{opts: o, cfg: configFor(o.Quick)}
	needsBinaries := slices.ContainsFunc(want, func(id string) bool { return id != "P1" && id != "P5" })
	if needsBinaries {
		for _, p := range []string{o.Self, filepath.Join(o.BinDir, "worker"), filepath.Join(o.BinDir, "recorder"), filepath.Join(o.BinDir, "ingress")} {
			if _, err := os.Stat(p); err != nil {
				return nil, fmt.Errorf("bench needs the built binaries (make build): %w", err)
			}
		}
	}
	if e.tmp, err = os.MkdirTemp(o.TempDir, "bub-bench-"); err != nil {
		return nil, err
	}
	defer os.RemoveAll(e.tmp)
	e.progress = NewProgress(o.Progress, e.steps(want))
	rep := &Report{Machine: ThisMachine(), Date: time.Now(), Commit: Commit(o.RepoDir), LoadBefore: LoadAverage(), Mode: "full"}
	if o.Quick {
		rep.Mode = "quick"
	}
	if len(o.Only) > 0 {
		rep.Mode += " (only " + strings.Join(want, ",") + ")"
	}
	start := time.Now()
	main := Table{Title: "Results", Intro: "The issue's figures P1–P8."}
	up := Table{Title: "All-in-one (`bub up` layout)", Intro: upIntro}
	scale := Table{Title: "Worker processes", Intro: scaleIntro}
	durable := Table{Title: "Cluster and durability", Intro: durableIntro}
	oneCPU := Table{Title: "One CPU per process", Intro: oneCPUIntro}
	var cpu cpuTable
	var scaleRates []float64
	var pattern simParams
	var extra string

	add := func(t *Table, rows []Row, err error) error {
		t.Rows = append(t.Rows, rows...)
		return err
	}
	has := func(id string) bool { return slices.Contains(want, id) }
	var errs []error
	if has("P1") {
		rows, err := runP1(e)
		errs = append(errs, add(&main, rows, wrap("P1", err)))
	}
	if has("P2") {
		rows, err := runP2(ctx, e)
		errs = append(errs, add(&main, rows, wrap("P2", err)))
	}
	if has("P3") || has("P4") || has("SCALE") {
		res, err := runDistributed(ctx, e, has("P3") || has("SCALE"), has("P4"), has("SCALE"))
		errs = append(errs, wrap("P3/P4", err))
		main.Rows = append(main.Rows, res.main...)
		scale.Rows = append(scale.Rows, res.scale...)
		cpu, scaleRates, pattern, extra = res.cpu, res.scaleRates, res.pattern, res.extra
	}
	if has("P5") {
		rows, err := runP5(ctx, e)
		errs = append(errs, add(&main, rows, wrap("P5", err)))
	}
	if has("P6") {
		rows, err := runP6(ctx, e)
		errs = append(errs, add(&main, rows, wrap("P6", err)))
	}
	if has("P7") {
		rows, err := runP7(ctx, e)
		errs = append(errs, add(&main, rows, wrap("P7", err)))
	}
	if has("P8") {
		rows, err := runP8(ctx, e)
		errs = append(errs, add(&main, rows, wrap("P8", err)))
	}
	if has("UP") {
		rows, _, err := allInOneVariant.run(ctx, e)
		errs = append(errs, add(&up, rows, wrap("UP", err)))
	}
	if has("CLUSTER") {
		rows, _, err := clusterVariant.run(ctx, e)
		errs = append(errs, add(&durable, rows, wrap("CLUSTER", err)))
	}
	if has("SYNC") {
		rows, _, err := syncVariant.run(ctx, e)
		errs = append(errs, add(&durable, rows, wrap("SYNC", err)))
	}
	var oneCPUTime cpuTable
	if has("CPU1") {
		var rows []Row
		rows, oneCPUTime, err = oneCPUVariant.run(ctx, e)
		errs = append(errs, add(&oneCPU, rows, wrap("CPU1", err)))
	}
	e.progress.Finish()
	slices.SortStableFunc(main.Rows, func(a, b Row) int { return strings.Compare(a.ID, b.ID) })
	for _, t := range []Table{main, up, scale, durable, oneCPU} {
		if len(t.Rows) > 0 {
			rep.Tables = append(rep.Tables, t)
		}
	}
	if len(cpu.labels) > 0 {
		rep.Sections = append(rep.Sections, Section{Title: "Where the CPU goes (P3, distributed, 1 worker)", Body: cpuIntro + "\n\n" + cpu.markdown()})
		if extra != "" {
			rep.Sections = append(rep.Sections, Section{Title: "What a real turn does beyond the simulated pattern", Body: extraIntro + "\n\n" + extra})
		}
		rep.Sections = append(rep.Sections, Section{Title: "How it scales across machines", Body: scalingModel(cpu, pattern, main.Rows, scaleRates)})
	}
	if len(oneCPUTime.labels) > 0 {
		rep.Sections = append(rep.Sections, Section{Title: "Where the CPU goes with GOMAXPROCS=1 (P3·1cpu)", Body: cpuIntro + "\n\n" + oneCPUTime.markdown()})
	}
	rep.Sections = append(rep.Sections, Section{Title: "Method", Body: method(e.cfg)})
	rep.Elapsed = time.Since(start)
	rep.LoadAfter = LoadAverage()
	return rep, errors.Join(errs...)
}

func wrap(id string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", id, err)
}

// selected returns the figure ids to run, in [Figures] order.
func selected(o Options) ([]string, error) {
	if len(o.Only) == 0 {
		if o.Quick {
			return slices.Clone(quickFigures), nil
		}
		return slices.Clone(Figures), nil
	}
	var out []string
	for _, id := range o.Only {
		id = strings.ToUpper(strings.TrimSpace(id))
		if id == "" {
			continue
		}
		if !slices.Contains(Figures, id) {
			return nil, fmt.Errorf("unknown figure %q (want some of %s)", id, strings.Join(Figures, ","))
		}
		out = append(out, id)
	}
	slices.SortFunc(out, func(a, b string) int { return slices.Index(Figures, a) - slices.Index(Figures, b) })
	return slices.Compact(out), nil
}

// steps counts the progress bar's steps of a run: one per measured
// repetition (and warm-up run) of each figure.
func (e *env) steps(want []string) int {
	r := e.cfg.reps
	per := map[string]int{
		"P1": 2 * (r + 1), "P2": 1 + 2*r, "P3": 2 * r, "P4": 2 * r, "P5": 2 * (r + 1),
		"P6": 2 * r, "P7": 2 * (r + 1), "P8": 2 * r, "UP": 4 * r, "SCALE": 4 * r,
		"CLUSTER": 4 * r, "SYNC": 2 * r, "CPU1": 4 * r,
	}
	n := 0
	for _, id := range want {
		n += per[id]
	}
	if slices.Contains(want, "SCALE") && !slices.Contains(want, "P3") {
		n += 2 * r
	}
	return max(n, 1)
}

// startServer starts a NATS server process (`bub up --services=`) with
// its data under dir and returns it with its client URL.
func startServer(ctx context.Context, e *env, dir string) (*proc, string, error) {
	p, m, err := startProc(ctx, "nats-server", e.opts.Self,
		[]string{"up", "--services=", "--nats-listen", "127.0.0.1:0", "--home", dir},
		[]string{"BUB_NATS_URL="}, regexp.MustCompile(`bub up: nats (nats://\S+)`))
	if err != nil {
		return nil, "", err
	}
	return p, m[1], nil
}

// startFigureServer makes a directory for one figure under the run's and
// starts a NATS server process keeping its data there.
func startFigureServer(ctx context.Context, e *env, name string) (dir string, srv *proc, url string, err error) {
	if dir, err = os.MkdirTemp(e.tmp, name+"-"); err != nil {
		return "", nil, "", err
	}
	srv, url, err = startServer(ctx, e, filepath.Join(dir, "nats"))
	return dir, srv, url, err
}

const upIntro = "P3 and P4 in the layout of `bub up`: one process with the embedded NATS server and ingress, " +
	"worker and recorder on in-process connections (`stack.StartServices`); the interceptor is still a separate " +
	"process over TCP, and the simulation runs in the same process on in-process connections."

const durableIntro = "P3 and P4 (distributed layout) on a 3-node JetStream cluster: three nats-server processes on loopback, " +
	"every stream, bucket and shared consumer at R3 (BUB_REPLICAS=3), the simulation's streams at R3 on the same cluster; " +
	"and P3 on one server that fsyncs every write (BUB_JS_SYNC=always) beside the simulation on that server — " +
	"the default (fsync every 2 minutes) is P3 above. The ratio goals are those of P3 and P4."

const oneCPUIntro = "P3 and P4 (distributed layout) with GOMAXPROCS=1 in every process the harness starts: the NATS server, " +
	"the services, the interceptor and the simulation's processes alike (the load generator keeps Go's default). " +
	"Each Go process sizes its scheduler to every core of the machine; several of them on one machine keep waking " +
	"threads on all cores to look for work, and this row shows what that costs the pipeline here. It is the layout of " +
	"a deployment that gives each service one CPU with GOMAXPROCS=1 or a one-CPU cpuset (Go's default from a container's " +
	"CPU limit is at least 2). The ratio goals are those of P3 and P4."

const scaleIntro = "P3 (distributed) with 1, 2 and 4 worker processes, and as many sim worker processes for the limit. " +
	"Every process shares this machine's cores."

const cpuIntro = "CPU time per fully recorded turn of each process during the P3 windows (user + system, from " +
	"/proc/<pid>/stat; median over the repetitions). The harness is the load generator (the ingress gateway for " +
	"the pipeline, the sim client for the simulation)."

const extraIntro = "Counted on the NATS server's subjects during the P3 warm-up (distributed layout), per answered turn, " +
	"beside the pattern the simulation copies (1 inbound, the interceptor requests, the stored events and tape messages, " +
	"1 outbound): JetStream API requests by kind (each a request/reply the server handles on its API path; consumer " +
	"creation is the most expensive) and KV writes (each a stored JetStream message). The harness's own requests are not counted."

// method describes the harness for the report.
func method(c config) string {
	return fmt.Sprintf(`- **P1** testing.Benchmark of package hooks's own benchmarks (hookstest.BenchmarkResolveSession, BenchmarkDispatchOutbound), %d repetitions of about %s each after a warm-up run; three in-process plugins, the lowest-priority one answering.
- **P2** %d sequential calls per repetition after %d warm-up calls: remote.Plugin.BeforeToolCall to the interceptor process, beside nats.go Request of the same request body to a raw responder in the same process replying the same bytes. Client, NATS server and interceptor are three processes on loopback TCP.
- **P3** a closed loop of %d turns in flight for %s per repetition; turns/s counts the answered turns over the time until the recorder has acknowledged every event of them (fully recorded). Real turns: ingress's Gateway (publish + wait for the outbound envelope) → bin/worker (echo model, BUB_WORKER_CONCURRENCY=%d, the interceptor on before_llm_call and after_llm_call through BUB_INTERCEPTORS, fail-closed) → bin/recorder. Every turn has its own session. The simulation's counts and sizes are measured on the real pipeline during its warm-up (see the limit column).
- **P4** an open loop at %d turns/s for %s per repetition (after %s at the rate): POST /v1/messages?wait=20s to bin/ingress beside the simulation at the same rate; latency from send to reply; a turn not answered within the wait (or 30 s) counts as failed, and a rate the pipeline cannot sustain shows as queueing (seconds).
- **P5** testing.Benchmark of package tape's own benchmark (tapetest.ReadMessagesBenchmark) of Tape.ReadMessages (the default context: entries after the last anchor, which is 50 entries back) on a JetStream tape of %d entries beside one of 100 entries (about 300 B each), embedded server, file storage, read from the stream each time (the store's entry cache off, tape.WithEntryCache(0)).
- **P3·js** the growth of every stream's last sequence (messages stored, including those a work queue or a KV history removes again) and of the bytes the streams hold, around each P3 window, per turn; the pipeline's streams and buckets beside the simulation's.
- **P6** bin/worker (BUB_WORKER_CONCURRENCY ≥ turns) against a fake OpenAI server that streams its answer after %s; %d envelopes published at once per repetition; VmRSS sampled every 10 ms, with its file-backed part (RssFile: the binary's pages mapped in) at the peak, and the worker's Go runtime metrics (go_memstats stack_inuse and heap_sys − heap_released, from its BUB_METRICS_ADDR) read each time the RSS rises 2 MiB above the last reading. P6 serves the model over HTTPS with HTTP/2 (httptest TLS server, its certificate trusted through SSL_CERT_FILE; every request checked to arrive over HTTP/2), P6·h1 over plain HTTP/1.1, each with its own worker process; each names the most connections the worker opened to its model in a repetition.
- **P8** %d sessions, each with an SSE client of GET /v1/sessions/{s}/events on bin/ingress, post one message after another (POST /v1/messages?wait=20s) to bin/worker (openai provider) streaming from a fake model (3 chunks, %s apart), stream i starting i × %s / %d after the first, so the streams are spread over about one turn as independent users are (started together they stay in step, and every turn's first delta comes amid the starts of all the others: a burst of simultaneous turns); the figure is the time from the model flushing its first content delta to the SSE client reading that run's first delta event. The limit: the same %d streams through a bare SSE relay process (HTTP client to the same model, each line written and flushed to its client). Windows of %s per repetition; the goal is on the difference from the relay.
- **CLUSTER** P3 and P4 as above with three nats-server processes (bub bench --serve nats-node) routed on loopback, BUB_REPLICAS=3 for the services and R3 for the simulation's streams.
- **SYNC** P3 as above on a server started with BUB_JS_SYNC=always.
- **CPU1** P3 and P4 as above with GOMAXPROCS=1 in the environment of every child process (server, services, interceptor, simulation).
- **P7** %d lifecycle events (tool_call.finished) per repetition through an events.Bridge beside MarshalJSON of a prebuilt CloudEvent + js.PublishAsync; the figure is the publishing process's CPU time per event (the NATS server is a separate process), every ack awaited.`,
		c.reps, c.benchTime, c.hopSamples, 300, c.inflight, c.window, c.workerConcurrency, c.rate, c.latencyWindow, c.warmup,
		c.tapeEntries, c.rssDelay, c.rssTurns, ttftStreams, ttftChunkGap, ttftSpread, ttftStreams, ttftStreams, c.latencyWindow, c.events)
}
