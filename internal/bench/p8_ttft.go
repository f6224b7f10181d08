package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/pkg/events"
)

// P8: time to first token, what a chat user feels. From the moment the
// fake model has flushed its first streamed delta to the moment an SSE
// client of GET /v1/sessions/{s}/events (bin/ingress) receives it, the
// delta having crossed bin/worker, core NATS and ingress; beside a bare SSE
// relay (a process that streams the same model's answer to its client
// line by line) with the same number of concurrent streams.

// ttftStreams is the concurrent streams of P8.
const ttftStreams = 50

// Goals of P8: the overhead above the relay.
const (
	ttftGoalP50 = 2 * time.Millisecond
	ttftGoalP99 = 10 * time.Millisecond
)

// ttftChunkGap is the model's gap between streamed chunks: a stream lasts
// a few hundred milliseconds, so 50 of them at once are a load a chat
// deployment sees, not a saturated machine.
const ttftChunkGap = 150 * time.Millisecond

// ttftSpread is about one turn's length (the model's 3 chunks): the
// streams start spread over it ([streamStart]).
const ttftSpread = 3 * ttftChunkGap

// streamStart is when stream i starts after the first: i/ttftStreams of
// ttftSpread. Independent chat users are not in step. Started together,
// the streams stay in step (every turn lasts as long), so each turn's
// first delta would arrive in the same few milliseconds as the starts of
// the 49 others: that measures a burst of 50 simultaneous turns, not 50
// concurrent streams.
func streamStart(i int) time.Duration {
	return time.Duration(i) * ttftSpread / ttftStreams
}

// markerRe finds a turn's marker in a model request body; the last one is
// the turn's own (earlier ones are history).
var markerRe = regexp.MustCompile(`p8-[0-9A-Za-z-]+`)

// firstDelta is the fake model wrapped to note when it flushed the first
// content delta of each request, by the request's marker.
type firstDelta struct {
	model http.Handler
	at    sync.Map // marker → time.Time
}

func (f *firstDelta) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	ms := markerRe.FindAll(body, -1)
	if len(ms) == 0 {
		f.model.ServeHTTP(w, r)
		return
	}
	f.model.ServeHTTP(&firstFlush{ResponseWriter: w, note: func(t time.Time) { f.at.LoadOrStore(string(ms[len(ms)-1]), t) }}, r)
}

// since returns the time from the model's first delta of marker to t.
func (f *firstDelta) since(marker string, t time.Time) (time.Duration, error) {
	v, ok := f.at.Load(marker)
	if !ok {
		return 0, fmt.Errorf("the model streamed no delta for %s", marker)
	}
	return t.Sub(v.(time.Time)), nil
}

// firstFlush notes the time right after the first flush that carried a
// content delta ("content" in a data line) reached the connection.
type firstFlush struct {
	http.ResponseWriter
	note    func(time.Time)
	pending bool
	done    bool
}

var contentKey = []byte(`"content":`)

func (f *firstFlush) Write(b []byte) (int, error) {
	if !f.done && bytes.Contains(b, contentKey) {
		f.pending = true
	}
	return f.ResponseWriter.Write(b)
}

func (f *firstFlush) Flush() {
	if fl, ok := f.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
	if f.pending && !f.done {
		f.done = true
		f.note(time.Now())
	}
}

func runP8(ctx context.Context, e *env) ([]Row, error) {
	e.progress.Show("P8: starting the NATS server, the fake model, the relay, bin/worker, bin/recorder and bin/ingress")
	dir, srv, natsURL, err := startFigureServer(ctx, e, "p8")
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	model := &firstDelta{model: fakellm.New(fakellm.Script{Steps: []fakellm.Step{{Echo: true, Repeat: true, Chunks: 3, ChunkDelay: fakellm.Duration(ttftChunkGap)}}})}
	modelURL, stopModel, err := serveHTTP(model)
	if err != nil {
		return nil, err
	}
	defer stopModel()

	var procs []*proc
	defer func() {
		for i := len(procs) - 1; i >= 0; i-- {
			_ = procs[i].stop()
		}
	}()
	start := func(name, path string, args, env []string, ready string) ([]string, error) {
		p, m, err := startProc(ctx, name, path, args, env, regexp.MustCompile(ready))
		if err == nil {
			procs = append(procs, p)
		}
		return m, err
	}
	svcEnv := func(name string) []string {
		return []string{"BUB_NATS_URL=" + natsURL, "BUB_HOME=" + filepath.Join(dir, name), "BUB_WORKSPACE=" + dir,
			"BUB_LOG_LEVEL=info", "BUB_INSTANCE=" + name}
	}
	m, err := start("sse relay", e.opts.Self, []string{"bench", "--serve", RoleSSERelay, "--upstream", modelURL}, nil, `bench\.ready.*addr=(\S+)`)
	if err != nil {
		return nil, err
	}
	relay := "http://" + m[1]
	if _, err := start("recorder", filepath.Join(e.opts.BinDir, "recorder"), nil, svcEnv("recorder"), `recorder\.consuming`); err != nil {
		return nil, err
	}
	if _, err := start("worker", filepath.Join(e.opts.BinDir, "worker"), nil, append(svcEnv("worker"),
		"BUB_MODEL=openai:fake", "BUB_API_BASE="+modelURL+"/v1", "BUB_API_KEY=sk-bench",
		"BUB_WORKER_CONCURRENCY="+strconv.Itoa(4*ttftStreams)), `worker\.consuming`); err != nil {
		return nil, err
	}
	m, err = start("ingress", filepath.Join(e.opts.BinDir, "ingress"), []string{"--http", "127.0.0.1:0"}, svcEnv("ingress"), `ingress\.listening.*addr=(\S+)`)
	if err != nil {
		return nil, err
	}
	client := newLoadClient()
	if err := waitHTTPReady(ctx, client, m[1]); err != nil {
		return nil, err
	}
	alive := func() error {
		var errs []error
		for _, p := range procs {
			errs = append(errs, p.alive())
		}
		return errors.Join(errs...)
	}
	t := &ttft{model: model, client: client, ingress: "http://" + m[1], relay: relay}
	window := e.cfg.latencyWindow
	e.progress.Show("P8: warm-up")
	if _, err := t.run(ctx, e.cfg.warmup, t.relayTurn); err != nil {
		return nil, fmt.Errorf("relay warm-up: %w (%v)", err, alive())
	}
	if _, err := t.run(ctx, e.cfg.warmup, t.pipelineTurn); err != nil {
		return nil, fmt.Errorf("pipeline warm-up: %w (%v)", err, alive())
	}
	var f50, f99, l50, l99 []float64
	for rep := range e.cfg.reps {
		e.progress.Step(fmt.Sprintf("P8: bare SSE relay, %d streams%s", ttftStreams, repLabel(rep, e.cfg.reps)))
		lim, err := t.run(ctx, window, t.relayTurn)
		if err != nil {
			return nil, fmt.Errorf("relay: %w (%v)", err, alive())
		}
		e.progress.Step(fmt.Sprintf("P8: ingress SSE, %d streams%s", ttftStreams, repLabel(rep, e.cfg.reps)))
		fig, err := t.run(ctx, window, t.pipelineTurn)
		if err != nil {
			return nil, fmt.Errorf("pipeline: %w (%v)", err, alive())
		}
		l50, l99 = append(l50, float64(lim.P50())), append(l99, float64(lim.P99()))
		f50, f99 = append(f50, float64(fig.P50())), append(f99, float64(fig.P99()))
	}
	mk := func(pct string, fig, lim []float64, bound time.Duration) Row {
		over := make([]float64, len(fig))
		for i := range fig {
			over[i] = fig[i] - lim[i]
		}
		o := Summarize(over)
		return Row{
			ID: "P8", Figure: fmt.Sprintf("time to first token, model's first delta → SSE client of GET /v1/sessions/{s}/events (bin/worker → NATS → bin/ingress), %d concurrent streams, %s", ttftStreams, pct),
			Value: Summarize(fig), Unit: Nanos, Extra: "over the relay " + statCell(o, Nanos), Over: o,
			LimitName: fmt.Sprintf("a bare SSE relay of the same model stream (separate process), %d concurrent streams, %s", ttftStreams, pct),
			Limit:     Summarize(lim), Ratio: Summarize(ratios(fig, lim)),
			Goal: fmt.Sprintf("≤ relay + %s", bound), Result: AtMost(o.Median, float64(bound)),
		}
	}
	return []Row{mk("p50", f50, l50, ttftGoalP50), mk("p99", f99, l99, ttftGoalP99)}, nil
}

// newLoadClient is an HTTP client for many concurrent local requests.
func newLoadClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, IdleConnTimeout: time.Minute}}
}

// serveHTTP serves h on a loopback port and returns its base URL.
func serveHTTP(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() { _ = hs.Serve(ln) })
	return "http://" + ln.Addr().String(), func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
		wg.Wait()
	}, nil
}

// ttft runs P8's streams.
type ttft struct {
	model          *firstDelta
	client         *http.Client
	ingress, relay string
}

// streamTurn is one stream's loop body: it runs turns until ctx ends and
// sends each turn's time to first token.
type streamTurn func(ctx context.Context, stream int, out chan<- time.Duration) error

// run keeps ttftStreams streams busy for d and returns their times to
// first token; a failed turn ends the run with its error.
func (t *ttft) run(ctx context.Context, d time.Duration, turn streamTurn) (Latencies, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	out := make(chan time.Duration, 1024)
	errc := make(chan error, ttftStreams)
	var wg sync.WaitGroup
	for i := range ttftStreams {
		wg.Go(func() {
			select {
			case <-time.After(streamStart(i)):
			case <-ctx.Done():
				return
			}
			if err := turn(ctx, i, out); err != nil && ctx.Err() == nil {
				errc <- err
				cancel()
			}
		})
	}
	go func() { wg.Wait(); close(out) }()
	var l Latencies
	for v := range out {
		l = append(l, v)
	}
	close(errc)
	if err := <-errc; err != nil {
		return nil, err
	}
	if len(l) == 0 {
		return nil, errors.New("no stream answered")
	}
	return l, nil
}

// sseEvents reads server-sent events from r and calls fn with each event's
// name and data until fn returns false or r ends.
func sseEvents(r io.Reader, fn func(name string, data []byte) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	name := ""
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if data != nil && !fn(name, data) {
				return nil
			}
			name, data = "", nil
		case bytes.HasPrefix(line, []byte("event: ")):
			name = string(line[len("event: "):])
		case bytes.HasPrefix(line, []byte("data: ")):
			data = append([]byte(nil), line[len("data: "):]...)
		}
	}
	return sc.Err()
}

// relayTurn streams one answer after another through the relay, each
// through its own request.
func (t *ttft) relayTurn(ctx context.Context, _ int, out chan<- time.Duration) error {
	for ctx.Err() == nil {
		marker := "p8-" + events.NewID()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.relay+"/?text="+url.QueryEscape(marker), nil)
		if err != nil {
			return err
		}
		resp, err := t.client.Do(req)
		if err != nil {
			return err
		}
		var first time.Time
		err = sseEvents(resp.Body, func(string, []byte) bool {
			if first.IsZero() {
				first = time.Now()
			}
			return true
		})
		resp.Body.Close()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		if first.IsZero() {
			return fmt.Errorf("the relay streamed nothing for %s (status %d)", marker, resp.StatusCode)
		}
		d, err := t.model.since(marker, first)
		if err != nil {
			return err
		}
		out <- d
	}
	return nil
}

// pipelineTurn holds one session's event stream open on ingress and posts
// one message after another to the session, noting when each run's first
// delta arrives.
func (t *ttft) pipelineTurn(ctx context.Context, stream int, out chan<- time.Duration) error {
	chat := "p8s" + strconv.Itoa(stream) + "-" + events.NewID()
	session := "bench:" + chat
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.ingress+"/v1/sessions/"+url.PathEscape(session)+"/events", nil)
	if err != nil {
		return err
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET events answered %d", resp.StatusCode)
	}
	firsts := make(chan time.Time, 64)
	var readErr atomic.Pointer[error]
	go func() {
		err := sseEvents(resp.Body, func(name string, data []byte) bool {
			if name != "delta" {
				return true
			}
			var d struct {
				Seq int `json:"seq"`
			}
			if json.Unmarshal(data, &d) == nil && d.Seq == 1 {
				firsts <- time.Now()
			}
			return true
		})
		if err != nil {
			readErr.Store(&err)
		}
	}()
	for ctx.Err() == nil {
		marker := "p8-" + events.NewID()
		body, _ := json.Marshal(map[string]string{"content": marker, "channel": "bench", "chat_id": chat})
		preq, err := http.NewRequestWithContext(ctx, http.MethodPost, t.ingress+"/v1/messages?wait=20s", bytes.NewReader(body))
		if err != nil {
			return err
		}
		preq.Header.Set("Content-Type", "application/json")
		presp, err := t.client.Do(preq)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		reply, _ := io.ReadAll(presp.Body)
		presp.Body.Close()
		if presp.StatusCode != http.StatusOK {
			return fmt.Errorf("POST /v1/messages answered %d: %.200s", presp.StatusCode, reply)
		}
		select {
		case first := <-firsts:
			d, err := t.model.since(marker, first)
			if err != nil {
				return err
			}
			out <- d
		case <-time.After(5 * time.Second):
			if p := readErr.Load(); p != nil {
				return fmt.Errorf("reading the event stream: %w", *p)
			}
			return fmt.Errorf("no delta of %s on the event stream of %s within 5s of the reply", marker, session)
		case <-ctx.Done():
		}
	}
	return nil
}

// serveSSERelay is the limit of P8: GET /?text=T asks upstream (an
// OpenAI-compatible API) for a streamed completion of T and relays every
// server-sent event line by line to the client, flushing each; nothing
// is decoded.
func serveSSERelay(ctx context.Context, upstream string, ready func(addr string)) error {
	client := newLoadClient()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := json.Marshal(map[string]any{"model": "fake", "stream": true,
			"messages": []map[string]string{{"role": "user", "content": r.URL.Query().Get("text")}}})
		req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, upstream+"/v1/chat/completions", bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		flusher := w.(http.Flusher)
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadSlice('\n')
			if len(line) > 0 {
				if _, werr := w.Write(line); werr != nil {
					return
				}
				if len(bytes.TrimSpace(line)) == 0 {
					flusher.Flush()
				}
			}
			if err != nil {
				flusher.Flush()
				return
			}
		}
	})
	base, stop, err := serveHTTP(h)
	if err != nil {
		return err
	}
	defer stop()
	ready(base[len("http://"):])
	<-ctx.Done()
	return nil
}
