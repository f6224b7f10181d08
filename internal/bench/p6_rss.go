package bench

import (
	"bufio"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/internal/freeport"
	"github.com/bubbus/bub/internal/ingress"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/subjects"
)

// P6: the resident memory of a worker process (bin/worker) with many turns
// in flight, each waiting for a streaming model that answers after a
// delay.

// The goals of P6: against an HTTPS/HTTP2 provider, and an HTTP/1.1 one.
const (
	rssGoalMiB   = 100
	rssGoalH1MiB = 150
)

// rssVariant is one provider protocol of P6.
type rssVariant struct {
	id, proto string
	base      string   // the model's API base URL
	env       []string // added to the worker's environment
	goalMiB   float64
	// major is the HTTP major version every model request must arrive
	// with.
	major int
	// conns counts the connections the model server accepted.
	conns *atomic.Int64
}

// protoCounter counts the model's requests by HTTP major version (0 for
// any other).
type protoCounter struct {
	h       http.Handler
	byMajor [3]atomic.Int64
}

func (p *protoCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	major := r.ProtoMajor
	if major < 1 || major > 2 {
		major = 0
	}
	p.byMajor[major].Add(1)
	p.h.ServeHTTP(w, r)
}

func (p *protoCounter) counts() [3]int64 {
	var out [3]int64
	for i := range out {
		out[i] = p.byMajor[i].Load()
	}
	return out
}

// countConns makes s count the connections it accepts.
func countConns(s *http.Server) *atomic.Int64 {
	var n atomic.Int64
	s.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			n.Add(1)
		}
	}
	return &n
}

func runP6(ctx context.Context, e *env) ([]Row, error) {
	e.progress.Show("P6: starting the NATS server and the fake models (HTTPS with HTTP/2, HTTP/1.1)")
	dir, srv, url, err := startFigureServer(ctx, e, "p6")
	if err != nil {
		return nil, err
	}
	defer srv.stop()

	model := fakellm.New(fakellm.Script{Steps: []fakellm.Step{{Echo: true, Repeat: true, Chunks: 3, Delay: fakellm.Duration(e.cfg.rssDelay)}}})
	counter := &protoCounter{h: model}
	// The HTTPS provider, as OpenAI, Anthropic and OpenRouter are: TLS
	// with HTTP/2, its certificate trusted by the worker through
	// SSL_CERT_FILE.
	tlsModel := httptest.NewUnstartedServer(counter)
	tlsModel.EnableHTTP2 = true
	tlsModel.Config.ErrorLog = log.New(io.Discard, "", 0)
	tlsConns := countConns(tlsModel.Config)
	tlsModel.StartTLS()
	defer tlsModel.Close()
	certFile := filepath.Join(dir, "model-ca.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsModel.Certificate().Raw}), 0o600); err != nil {
		return nil, err
	}
	// The plain HTTP/1.1 provider (a local vLLM or Ollama).
	plainModel := httptest.NewUnstartedServer(counter)
	plainConns := countConns(plainModel.Config)
	plainModel.Start()
	defer plainModel.Close()

	nc, err := nats.Connect(url, nats.Name("bench-p6"))
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	names := subjects.Default()
	if err := natsx.EnsureTopology(ctx, js, names, natsx.Topology{}); err != nil {
		return nil, err
	}
	gw, err := ingress.NewGateway(nc, js, names, events.Source("bench", "p6"), nil)
	if err != nil {
		return nil, err
	}
	defer gw.Close()

	variants := []rssVariant{
		{id: "P6", proto: "HTTPS/HTTP2", base: tlsModel.URL, env: []string{"SSL_CERT_FILE=" + certFile}, goalMiB: rssGoalMiB, major: 2, conns: tlsConns},
		{id: "P6·h1", proto: "HTTP/1.1", base: plainModel.URL, goalMiB: rssGoalH1MiB, major: 1, conns: plainConns},
	}
	var rows []Row
	for _, v := range variants {
		before := counter.counts()
		row, err := p6Variant(ctx, e, v, url, dir, gw, model)
		if err != nil {
			return rows, fmt.Errorf("%s (%s): %w", v.id, v.proto, err)
		}
		after := counter.counts()
		for major := range after {
			if n := after[major] - before[major]; (major == v.major) != (n > 0) {
				return rows, fmt.Errorf("%s: %d model requests came over HTTP/%d (want them all over HTTP/%d)", v.id, n, major, v.major)
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// memNear: how close to the peak RSS a round reads the worker's Go
// runtime metrics (each read costs the worker a little CPU, so not at
// every sample).
const memNear = 2 << 20

// goMem is what a Go process's runtime holds (its Prometheus /metrics):
// goroutine stacks, and heap pages not returned to the OS.
type goMem struct{ stacks, heap int64 }

// readGoMem reads the go_memstats of the /metrics endpoint at addr.
func readGoMem(ctx context.Context, addr string) (goMem, error) {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return goMem{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return goMem{}, err
	}
	defer resp.Body.Close()
	vals := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || !strings.HasPrefix(name, "go_memstats_") {
			continue
		}
		if f, err := strconv.ParseFloat(val, 64); err == nil {
			vals[name] = f
		}
	}
	if err := sc.Err(); err != nil {
		return goMem{}, err
	}
	stacks, ok1 := vals["go_memstats_stack_inuse_bytes"]
	sys, ok2 := vals["go_memstats_heap_sys_bytes"]
	released, ok3 := vals["go_memstats_heap_released_bytes"]
	if !ok1 || !ok2 || !ok3 {
		return goMem{}, fmt.Errorf("bench: %s/metrics has no go_memstats stack and heap figures", addr)
	}
	return goMem{stacks: int64(stacks), heap: int64(sys - released)}, nil
}

// p6Variant starts bin/worker against one provider and measures its peak
// RSS with e.cfg.rssTurns turns in flight.
func p6Variant(ctx context.Context, e *env, v rssVariant, url, dir string, gw *ingress.Gateway, model *fakellm.Server) (Row, error) {
	conc := max(e.cfg.rssTurns, 1024)
	metrics, err := freeport.Addr()
	if err != nil {
		return Row{}, err
	}
	e.progress.Show(fmt.Sprintf("%s: starting bin/worker against the %s model", v.id, v.proto))
	w, _, err := startProc(ctx, "bin/worker", filepath.Join(e.opts.BinDir, "worker"), nil, append([]string{
		"BUB_NATS_URL=" + url, "BUB_HOME=" + filepath.Join(dir, "worker"), "BUB_WORKSPACE=" + dir,
		"BUB_MODEL=openai:fake", "BUB_API_BASE=" + v.base + "/v1", "BUB_API_KEY=sk-bench",
		"BUB_WORKER_CONCURRENCY=" + strconv.Itoa(conc), "BUB_LOG_LEVEL=info", "BUB_METRICS_ADDR=" + metrics,
	}, v.env...), regexp.MustCompile(`worker\.consuming`))
	if err != nil {
		return Row{}, err
	}
	defer w.stop()
	// round sends n turns at once and samples the worker's RSS every 10 ms
	// until every reply is in; file is the file-backed part of the peak
	// (the binary's mapped pages), mem what the worker's Go runtime held
	// near the peak (read when the RSS first comes within memNear of it).
	round := func(n int) (peak, file int64, mem goMem, inflight int, err error) {
		base := len(model.Requests())
		var (
			replies atomic.Int64
			memAt   int64 // the RSS when mem was read
		)
		rctx, cancel := context.WithTimeout(ctx, e.cfg.rssDelay+90*time.Second)
		defer cancel()
		errc := make(chan error, n)
		var turns sync.WaitGroup
		sem := make(chan struct{}, 32) // publishers
		for range n {
			turns.Go(func() {
				sem <- struct{}{}
				id := events.NewID()
				await := gw.Expect(id)
				_, perr := gw.Publish(rctx, &envelope.Envelope{ID: id, Content: turnText, Channel: "bench", ChatID: id})
				<-sem
				if perr != nil {
					_, _ = await(rctx)
					errc <- perr
					return
				}
				outs, err := await(rctx)
				if err == nil && len(outs) == 0 {
					err = errors.New("no reply")
				}
				if err != nil {
					errc <- err
					return
				}
				replies.Add(1)
			})
		}
		finished := make(chan struct{})
		go func() { turns.Wait(); close(finished) }()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			rss, rerr := procRSS(w.pid(), "VmRSS")
			if rerr != nil {
				return 0, 0, mem, 0, errors.Join(rerr, w.alive()) // alive is nil until the exit is reaped
			}
			if rss > peak {
				peak = rss
				file, _ = procRSS(w.pid(), "RssFile")
			}
			if rss > memAt+memNear {
				if m, merr := readGoMem(rctx, metrics); merr == nil {
					mem, memAt = m, rss
				}
			}
			inflight = max(inflight, len(model.Requests())-base-int(replies.Load()))
			select {
			case <-finished:
				close(errc)
				var errs []error
				for err := range errc {
					errs = append(errs, err)
				}
				if len(errs) > 0 {
					return peak, file, mem, inflight, fmt.Errorf("%d of %d turns failed: %w", len(errs), n, errors.Join(errs[0], w.alive()))
				}
				return peak, file, mem, inflight, nil
			case <-tick.C:
			}
		}
	}
	e.progress.Show(v.id + ": warm-up (20 turns)")
	if _, _, _, _, err := round(20); err != nil {
		return Row{}, err
	}
	idle, _ := procRSS(w.pid(), "VmRSS")
	var peaks, files, stacks, heaps []float64
	minInflight := e.cfg.rssTurns
	var maxConns int64 // the most connections a repetition opened
	for rep := range e.cfg.reps {
		e.progress.Step(fmt.Sprintf("%s: %d turns in flight (%s)%s", v.id, e.cfg.rssTurns, v.proto, repLabel(rep, e.cfg.reps)))
		conns0 := v.conns.Load()
		peak, file, mem, inflight, err := round(e.cfg.rssTurns)
		if err != nil {
			return Row{}, err
		}
		maxConns = max(maxConns, v.conns.Load()-conns0)
		peaks = append(peaks, float64(peak)/(1<<20))
		files = append(files, float64(file)/(1<<20))
		stacks = append(stacks, float64(mem.stacks)/(1<<20))
		heaps = append(heaps, float64(mem.heap)/(1<<20))
		minInflight = min(minInflight, inflight)
	}
	hwm, _ := procRSS(w.pid(), "VmHWM")
	peak := Summarize(peaks)
	return Row{
		ID: v.id, Figure: fmt.Sprintf("worker RSS (peak VmRSS) with %d turns in flight, streaming model over %s answering after %s", e.cfg.rssTurns, v.proto, e.cfg.rssDelay),
		Value: peak, Unit: MiB,
		Extra: fmt.Sprintf("≥ %d model calls in flight at once in every repetition; of the peak, %.1f MiB file-backed (the binary's mapped pages), the rest anonymous: the Go runtime held %.1f MiB of goroutine stacks and %.1f MiB of heap from the OS (its metrics, read within %d MiB of the peak); idle %.1f MiB, VmHWM %.1f MiB; at most %d new connections to the model in a repetition",
			minInflight, Summarize(files).Median, Summarize(stacks).Median, Summarize(heaps).Median, memNear>>20, float64(idle)/(1<<20), float64(hwm)/(1<<20), maxConns),
		LimitName: "— (absolute)", Goal: fmt.Sprintf("≤ %g MiB", v.goalMiB), Result: AtMost(peak.Median, v.goalMiB),
	}, nil
}
