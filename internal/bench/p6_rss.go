package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/internal/ingress"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/subjects"
)

// P6: the resident memory of a worker process (bin/worker) with many turns
// in flight, each waiting for a streaming model that answers after a
// delay.

const rssGoalMiB = 100

func runP6(ctx context.Context, e *env) ([]Row, error) {
	dir, err := os.MkdirTemp(e.tmp, "p6-")
	if err != nil {
		return nil, err
	}
	e.progress.Show("P6: starting the NATS server, the fake model and bin/worker")
	srv, url, err := startServer(ctx, e, filepath.Join(dir, "nats"))
	if err != nil {
		return nil, err
	}
	defer srv.stop()

	model := fakellm.New(fakellm.Script{Steps: []fakellm.Step{{Echo: true, Repeat: true, Chunks: 3, Delay: fakellm.Duration(e.cfg.rssDelay)}}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: model, ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() { _ = hs.Serve(ln) })
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
		wg.Wait()
	}()

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

	conc := max(e.cfg.rssTurns, 1024)
	w, _, err := startProc(ctx, "bin/worker", filepath.Join(e.opts.BinDir, "worker"), nil, []string{
		"BUB_NATS_URL=" + url, "BUB_HOME=" + filepath.Join(dir, "worker"), "BUB_WORKSPACE=" + dir,
		"BUB_MODEL=openai:fake", "BUB_API_BASE=http://" + ln.Addr().String() + "/v1", "BUB_API_KEY=sk-bench",
		"BUB_WORKER_CONCURRENCY=" + strconv.Itoa(conc), "BUB_LOG_LEVEL=info",
	}, regexp.MustCompile(`worker\.consuming`))
	if err != nil {
		return nil, err
	}
	defer w.stop()

	// round sends n turns at once and samples the worker's RSS every 10 ms
	// until every reply is in.
	round := func(n int) (peak int64, inflight int, err error) {
		base := len(model.Requests())
		var replies atomic.Int64
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
				return 0, 0, fmt.Errorf("%w: %w", rerr, w.alive())
			}
			peak = max(peak, rss)
			inflight = max(inflight, len(model.Requests())-base-int(replies.Load()))
			select {
			case <-finished:
				close(errc)
				var errs []error
				for err := range errc {
					errs = append(errs, err)
				}
				if len(errs) > 0 {
					return peak, inflight, fmt.Errorf("%d of %d turns failed: %w", len(errs), n, errors.Join(errs[0], w.alive()))
				}
				return peak, inflight, nil
			case <-tick.C:
			}
		}
	}
	e.progress.Show("P6: warm-up (20 turns)")
	if _, _, err := round(20); err != nil {
		return nil, err
	}
	idle, _ := procRSS(w.pid(), "VmRSS")
	var peaks []float64
	minInflight := e.cfg.rssTurns
	for rep := range e.cfg.reps {
		e.progress.Step(fmt.Sprintf("P6: %d turns in flight%s", e.cfg.rssTurns, repLabel(rep, e.cfg.reps)))
		peak, inflight, err := round(e.cfg.rssTurns)
		if err != nil {
			return nil, err
		}
		peaks = append(peaks, float64(peak)/(1<<20))
		minInflight = min(minInflight, inflight)
	}
	hwm, _ := procRSS(w.pid(), "VmHWM")
	v := Summarize(peaks)
	return []Row{{
		ID: "P6", Figure: fmt.Sprintf("worker RSS (peak VmRSS) with %d turns in flight, streaming model answering after %s", e.cfg.rssTurns, e.cfg.rssDelay),
		Value: v, Unit: MiB,
		Extra:     fmt.Sprintf("≥ %d model calls in flight at once in every repetition; idle %.1f MiB, VmHWM %.1f MiB", minInflight, float64(idle)/(1<<20), float64(hwm)/(1<<20)),
		LimitName: "— (absolute)", Goal: fmt.Sprintf("≤ %d MiB", rssGoalMiB), Result: AtMost(v.Median, rssGoalMiB),
	}}, nil
}
