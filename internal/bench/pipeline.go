package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/internal/ingress"
	"github.com/bubbus/bub/internal/ingresscmd"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/internal/recorder"
	"github.com/bubbus/bub/internal/recordercmd"
	"github.com/bubbus/bub/internal/service"
	"github.com/bubbus/bub/internal/stack"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/subjects"
	"github.com/bubbus/bub/pkg/tape"
)

// P3 and P4 run the real pipeline and the simulation side by side on one
// NATS server. Two layouts:
//
//   - distributed: a NATS server process (`bub up --services=`), the
//     interceptor process, bin/worker processes (the interceptor configured
//     through BUB_INTERCEPTORS), bin/recorder,
//     bin/ingress (P4), and for the simulation sim-worker and sim-recorder
//     processes; the harness is the load generator.
//   - all-in-one: `bub up`'s layout — one process with the embedded
//     server and ingress, worker and recorder on in-process connections
//     (stack.StartServices); the interceptor stays a separate process over
//     TCP, the simulation's roles run in the same process on in-process
//     connections.

// Layouts.
const (
	distributed = "distributed"
	allInOne    = "all-in-one"
)

// turnText is the content of every benchmark message.
const turnText = "hello from bub bench"

// turnTimeout bounds one turn of the load.
const turnTimeout = 30 * time.Second

// layoutOpts vary the distributed layout's NATS servers.
type layoutOpts struct {
	// cluster runs a 3-node JetStream cluster (separate processes on
	// loopback) and every stream, bucket and shared consumer at R3.
	cluster bool
	// jsSync is BUB_JS_SYNC of the NATS server ("" = the server's default).
	jsSync string
	// replicas is the streams' replica count (0 = 1).
	replicas int
	// procs is GOMAXPROCS of every child process (0 = Go's default).
	procs int
}

// pipeline is one running layout: the real services and the simulation.
type pipeline struct {
	e      *env
	opts   layoutOpts
	layout string
	dir    string
	names  subjects.Names

	url    string
	server *proc
	cl     *stack.Cluster
	conn   *service.Conn // the harness's connection
	gw     *ingress.Gateway
	sim    *simClient
	params simParams
	// extra is what a real turn does beyond the simulation's pattern:
	// JetStream API requests by kind and KV writes, per turn.
	extra map[string]float64
	http  *http.Client
	addr  string // ingress HTTP address

	running *stack.Running // all-in-one services
	simStop context.CancelFunc
	simWG   sync.WaitGroup

	// roles are the child processes by CPU accounting label.
	roles   map[string][]*proc
	workers int
	// inflight is the closed loop's concurrency.
	inflight int
	// stored is what JetStream stored per turn in the last p3's windows.
	stored storedSamples
}

// CPU accounting labels.
const (
	lblServer      = "nats-server"
	lblInterceptor = "interceptor (+ raw responders)"
	lblWorker      = "worker"
	lblRecorder    = "recorder"
	lblIngress     = "ingress"
	lblSimWorker   = "sim worker"
	lblSimRecorder = "sim recorder"
	lblHarness     = "harness (load generator)"
	lblAllInOne    = "bub (server + ingress + worker + recorder + load generator)"
)

var readyRe = regexp.MustCompile(regexp.QuoteMeta(readyLine))

// startPipeline starts a layout with one real and one sim worker; ingress
// (an HTTP server) only when withHTTP.
func startPipeline(ctx context.Context, e *env, layout string, withHTTP bool, o layoutOpts) (_ *pipeline, err error) {
	dir, err := os.MkdirTemp(e.tmp, layout+"-")
	if err != nil {
		return nil, err
	}
	if o.cluster {
		o.replicas = clusterSize
	}
	pl := &pipeline{e: e, opts: o, layout: layout, dir: dir, names: subjects.Default(), roles: map[string][]*proc{},
		inflight: e.cfg.inflight}
	defer func() {
		if err != nil {
			pl.close()
		}
	}()
	pl.http = newLoadClient()
	if layout == distributed {
		err = pl.startDistributed(ctx, withHTTP)
	} else {
		err = pl.startAllInOne(ctx, withHTTP)
	}
	if err != nil {
		return nil, err
	}
	if pl.gw, err = ingress.NewGateway(pl.conn.NC, pl.conn.JS, pl.names, events.Source("bench", "driver"), nil); err != nil {
		return nil, err
	}
	e.progress.Show("P3 " + layout + ": measuring the real turn's message pattern")
	if err := pl.measurePattern(ctx); err != nil {
		return nil, err
	}
	if err := pl.startSim(ctx); err != nil {
		return nil, err
	}
	if pl.sim, err = newSimClient(pl.conn.NC, pl.conn.JS, pl.params.InboundBytes); err != nil {
		return nil, err
	}
	e.progress.Show("P3 " + layout + ": warming up the simulation")
	if _, failed, _, first := closedLoop(ctx, pl.inflight, e.cfg.warmup, pl.simTurn); failed > 0 {
		return nil, fmt.Errorf("simulation warm-up: %d turns failed, the first with: %w", failed, first)
	}
	if err := pl.waitRecorded(ctx, true); err != nil {
		return nil, err
	}
	return pl, nil
}

// child starts a child process and files it under label.
func (pl *pipeline) child(ctx context.Context, label, name, path string, args, env []string, ready *regexp.Regexp) ([]string, error) {
	if pl.opts.procs > 0 {
		env = append(slices.Clip(env), "GOMAXPROCS="+strconv.Itoa(pl.opts.procs))
	}
	p, m, err := startProc(ctx, name, path, args, env, ready)
	if err != nil {
		return nil, err
	}
	pl.roles[label] = append(pl.roles[label], p)
	return m, nil
}

func (pl *pipeline) serviceEnv(name string) []string {
	return []string{"BUB_NATS_URL=" + pl.url, "BUB_HOME=" + filepath.Join(pl.dir, name), "BUB_WORKSPACE=" + pl.dir,
		"BUB_LOG_LEVEL=info", "BUB_MODEL=echo:echo", "BUB_INSTANCE=" + name, "BUB_REPLICAS=" + strconv.Itoa(max(pl.opts.replicas, 1))}
}

func (pl *pipeline) startDistributed(ctx context.Context, withHTTP bool) error {
	e := pl.e
	e.progress.Show("P3 distributed: starting the NATS server, interceptor, worker and recorder processes")
	url, err := pl.startNATS(ctx)
	if err != nil {
		return err
	}
	common := &cli.Common{Home: pl.dir, Prefix: subjects.DefaultPrefix, NATS: natsx.ClientConfig{URL: url}}
	if err := pl.open(ctx, common, false, ""); err != nil {
		return err
	}
	if _, err := pl.child(ctx, lblRecorder, "recorder", filepath.Join(e.opts.BinDir, "recorder"), nil,
		pl.serviceEnv("recorder"), regexp.MustCompile(`recorder\.consuming`)); err != nil {
		return err
	}
	if err := pl.addWorkers(ctx, 1, false); err != nil {
		return err
	}
	if withHTTP {
		m, err := pl.child(ctx, lblIngress, "ingress", filepath.Join(e.opts.BinDir, "ingress"),
			[]string{"--http", "127.0.0.1:0"}, pl.serviceEnv("ingress"), regexp.MustCompile(`ingress\.listening.*addr=(\S+)`))
		if err != nil {
			return err
		}
		pl.addr = m[1]
		if err := pl.waitHTTPReady(ctx); err != nil {
			return err
		}
	}
	return nil
}

// open opens the cluster (embedded or not), connects the driver, creates
// the topologies and starts the interceptor process.
func (pl *pipeline) open(ctx context.Context, common *cli.Common, embed bool, listen string) (err error) {
	if pl.cl, err = stack.Open(common, embed, listen, nil); err != nil {
		return err
	}
	pl.url = pl.cl.URL()
	if pl.conn, err = pl.cl.Connect(ctx, "bench-driver"); err != nil {
		return err
	}
	if err := ensureTopologies(ctx, pl.conn, pl.opts.replicas); err != nil {
		return err
	}
	_, err = pl.child(ctx, lblInterceptor, "interceptor", pl.e.opts.Self,
		[]string{"bench", "--serve", RoleInterceptor, "--nats", pl.url}, nil, readyRe)
	return err
}

// ensureTopologies creates the real and the simulated streams, consumers
// and buckets (the services would create theirs as they start).
func ensureTopologies(ctx context.Context, conn *service.Conn, replicas int) error {
	if err := natsx.EnsureTopology(ctx, conn.JS, conn.Names, natsx.Topology{Replicas: replicas}); err != nil {
		return err
	}
	if _, err := tape.NewJetStreamStore(ctx, conn.JS, conn.Names, tape.WithReplicas(max(replicas, 1))); err != nil {
		return err
	}
	return ensureSimTopology(ctx, conn.JS, replicas)
}

// addWorkers starts n more real worker processes (bin/worker with the
// benchmark interceptor configured through BUB_INTERCEPTORS), and as many
// sim worker processes when sim is set.
func (pl *pipeline) addWorkers(ctx context.Context, n int, sim bool) error {
	for range n {
		pl.workers++
		name := "w" + strconv.Itoa(pl.workers)
		env := append(pl.serviceEnv(name), interceptorEnv()...)
		env = append(env, "BUB_WORKER_CONCURRENCY="+strconv.Itoa(pl.e.cfg.workerConcurrency))
		if _, err := pl.child(ctx, lblWorker, "worker "+name, filepath.Join(pl.e.opts.BinDir, "worker"), nil,
			env, regexp.MustCompile(`worker\.consuming`)); err != nil {
			return err
		}
		if sim {
			if err := pl.addSimWorker(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

func (pl *pipeline) addSimWorker(ctx context.Context) error {
	params, _ := json.Marshal(pl.params)
	_, err := pl.child(ctx, lblSimWorker, "sim worker", pl.e.opts.Self,
		[]string{"bench", "--serve", RoleSimWorker, "--nats", pl.url, "--params", string(params)}, nil, readyRe)
	return err
}

func (pl *pipeline) startAllInOne(ctx context.Context, withHTTP bool) error {
	e := pl.e
	e.progress.Show("P3 all-in-one: starting the embedded server and the services")
	common := &cli.Common{Home: pl.dir, Prefix: subjects.DefaultPrefix}
	if err := pl.open(ctx, common, true, "127.0.0.1:0"); err != nil {
		return err
	}
	var err error
	spec := stack.Services{
		Workers:  1,
		Worker:   workerOptions(e.cfg.workerConcurrency, pl.dir, "w"),
		Recorder: &recordercmd.Options{Instance: "r"},
	}
	if withHTTP {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		spec.Ingress = &ingresscmd.Options{Listener: ln, Instance: "i"}
		pl.addr = ln.Addr().String()
	}
	if pl.running, err = stack.StartServices(ctx, pl.cl, spec, nil); err != nil {
		return err
	}
	pl.workers = 1
	if withHTTP {
		return pl.waitHTTPReady(ctx)
	}
	return nil
}

// waitHTTPReady polls /readyz until ingress answers 200.
func (pl *pipeline) waitHTTPReady(ctx context.Context) error {
	return waitHTTPReady(ctx, pl.http, pl.addr)
}

// waitHTTPReady polls ingress's /readyz at addr until it answers 200.
func waitHTTPReady(ctx context.Context, client *http.Client, addr string) error {
	deadline := time.Now().Add(startTimeout)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ingress at %s not ready: %v", addr, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// startSim starts the simulation's worker and recorder with the measured
// turn pattern.
func (pl *pipeline) startSim(ctx context.Context) error {
	if pl.layout == distributed {
		params, _ := json.Marshal(pl.params)
		if _, err := pl.child(ctx, lblSimRecorder, "sim recorder", pl.e.opts.Self,
			[]string{"bench", "--serve", RoleSimRecorder, "--nats", pl.url, "--params", string(params)}, nil, readyRe); err != nil {
			return err
		}
		return pl.addSimWorker(ctx)
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	pl.simStop = cancel
	for _, role := range []func(context.Context, *nats.Conn, simParams) error{runSimWorker, runSimRecorder} {
		c, err := pl.cl.Connect(ctx, "bench-sim")
		if err != nil {
			return err
		}
		pl.simWG.Go(func() {
			defer c.NC.Close()
			_ = role(sctx, c.NC, pl.params)
		})
	}
	return nil
}

// close stops everything the layout started, children in reverse order.
func (pl *pipeline) close() {
	if pl.gw != nil {
		_ = pl.gw.Close()
	}
	if pl.sim != nil {
		pl.sim.Close()
	}
	if pl.simStop != nil {
		pl.simStop()
		pl.simWG.Wait()
	}
	if pl.running != nil {
		_ = pl.running.Stop()
	}
	order := []string{lblIngress, lblSimWorker, lblWorker, lblSimRecorder, lblRecorder, lblInterceptor}
	for _, l := range order {
		for _, p := range pl.roles[l] {
			_ = p.stop()
		}
	}
	if pl.conn != nil {
		pl.conn.NC.Close()
	}
	if pl.cl != nil {
		pl.cl.Shutdown()
	}
	for _, p := range pl.roles[lblServer] {
		_ = p.stop()
	}
	_ = os.RemoveAll(pl.dir)
}

// alive reports a child that died.
func (pl *pipeline) alive() error {
	var errs []error
	for _, ps := range pl.roles {
		for _, p := range ps {
			errs = append(errs, p.alive())
		}
	}
	return errors.Join(errs...)
}

// realTurn sends one message through ingress's gateway and waits for the
// reply.
func (pl *pipeline) realTurn(ctx context.Context, _ int) error {
	id := events.NewID()
	env := &envelope.Envelope{ID: id, Content: turnText, Channel: "bench", ChatID: id}
	ctx, cancel := context.WithTimeout(ctx, turnTimeout)
	defer cancel()
	await := pl.gw.Expect(id)
	if _, err := pl.gw.Publish(ctx, env); err != nil {
		_, _ = await(ctx)
		return err
	}
	outs, err := await(ctx)
	if err == nil && len(outs) == 0 {
		err = errors.New("no reply")
	}
	return err
}

// simTurn runs one simulated turn.
func (pl *pipeline) simTurn(ctx context.Context, _ int) error {
	id := events.NewID()
	ctx, cancel := context.WithTimeout(ctx, turnTimeout)
	defer cancel()
	return pl.sim.turn(ctx, id, "bench:"+id)
}

// httpTurn posts one message to ingress with ?wait= and checks that the
// reply came back in the response.
func (pl *pipeline) httpTurn(ctx context.Context, _ int) error {
	id := events.NewID()
	body, _ := json.Marshal(map[string]string{"id": id, "content": turnText, "channel": "bench", "chat_id": id})
	ctx, cancel := context.WithTimeout(ctx, turnTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+pl.addr+"/v1/messages?wait=20s", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := pl.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !bytes.Contains(out, []byte(`"outbounds"`)) {
		return fmt.Errorf("ingress answered %d: %.200s", resp.StatusCode, out)
	}
	return nil
}

// meter counts the messages and bytes seen on a subject and keeps the
// headers of the first one.
type meter struct {
	n, bytes atomic.Int64
	header   atomic.Pointer[nats.Header]
}

// appHeader returns the first message's headers but the NATS ones
// (Nats-Msg-Id, Nats-Expected-…).
func (m *meter) appHeader() nats.Header {
	h := m.header.Load()
	if h == nil {
		return nil
	}
	out := nats.Header{}
	for k, v := range *h {
		if !strings.HasPrefix(strings.ToLower(k), "nats-") {
			out[k] = v
		}
	}
	return out
}

func (m *meter) avg() int {
	if m.n.Load() == 0 {
		return 0
	}
	return int(m.bytes.Load() / m.n.Load())
}

// measurePattern warms the real pipeline up while counting, per turn, the
// messages and bytes of each kind it sends, and derives the simulation's
// parameters from them.
func (pl *pipeline) measurePattern(ctx context.Context) error {
	nc := pl.conn.NC
	var inbound, evs, tapes, outbound meter
	hookMeters := make([]meter, len(turnHooks))
	watch := func(subject string, m *meter) (*nats.Subscription, error) {
		sub, err := nc.Subscribe(subject, func(msg *nats.Msg) {
			m.n.Add(1)
			m.bytes.Add(int64(len(msg.Data)))
			if msg.Header != nil {
				m.header.CompareAndSwap(nil, &msg.Header)
			}
		})
		if err == nil {
			sub.SetPendingLimits(-1, -1)
		}
		return sub, err
	}
	var subs []*nats.Subscription
	defer func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
	}()
	watches := []struct {
		subject string
		m       *meter
	}{
		{pl.names.InboundAll(), &inbound},
		{pl.names.EventsAll(), &evs},
		{pl.names.TapesAll(), &tapes},
		{pl.names.TapeIndexesAll(), &tapes}, // the index committing each batch
		{pl.names.OutboundAll(), &outbound},
	}
	for i, h := range turnHooks {
		watches = append(watches, struct {
			subject string
			m       *meter
		}{pl.names.Hook(hookService, string(h)), &hookMeters[i]})
	}
	for _, w := range watches {
		s, err := watch(w.subject, w.m)
		if err != nil {
			return err
		}
		subs = append(subs, s)
	}
	// What the simulation leaves out: JetStream API requests (by kind) and
	// KV writes.
	var extraMu sync.Mutex
	extra := map[string]int{}
	// The harness's own requests (consumer and stream info) answer to its
	// connection's inbox prefix and are not counted.
	own := nc.NewRespInbox()
	own = own[:strings.LastIndexByte(own, '.')+1]
	count := func(subject string, kind func(string) string) error {
		sub, err := nc.Subscribe(subject, func(msg *nats.Msg) {
			if strings.HasPrefix(msg.Reply, own) {
				return
			}
			extraMu.Lock()
			extra[kind(msg.Subject)]++
			extraMu.Unlock()
		})
		if err == nil {
			sub.SetPendingLimits(-1, -1)
			subs = append(subs, sub)
		}
		return err
	}
	if err := count(jetstream.DefaultAPIPrefix+">", apiKind); err != nil {
		return err
	}
	for _, bucket := range []string{pl.names.StateBucket(), pl.names.TurnsBucket()} {
		if err := count(pl.names.KVKeySubject(bucket, ">"), func(string) string { return "KV write " + bucket }); err != nil {
			return err
		}
	}
	if err := nc.Flush(); err != nil {
		return err
	}
	// Counts come from the streams (messages stored: a checked publish the
	// stream rejects is not part of the pattern), sizes from what was sent.
	stored := func(stream string) (uint64, error) {
		st, err := pl.conn.JS.Stream(ctx, stream)
		if err != nil {
			return 0, err
		}
		info, err := st.Info(ctx)
		if err != nil {
			return 0, err
		}
		return info.State.Msgs, nil
	}
	events0, err := stored(pl.names.EventsStream())
	if err != nil {
		return err
	}
	tapes0, err := stored(pl.names.TapesStream())
	if err != nil {
		return err
	}
	done, failed, _, first := closedLoop(ctx, pl.inflight, pl.e.cfg.warmup, pl.realTurn)
	if failed > 0 || done == 0 {
		return fmt.Errorf("real pipeline warm-up: %d of %d turns failed, the first with: %w", failed, done+failed, errors.Join(first, pl.alive()))
	}
	if err := pl.waitRecorded(ctx, false); err != nil {
		return err
	}
	if err := nc.Flush(); err != nil {
		return err
	}
	events1, err := stored(pl.names.EventsStream())
	if err != nil {
		return err
	}
	tapes1, err := stored(pl.names.TapesStream())
	if err != nil {
		return err
	}
	per := func(m *meter) int { return int(math.Round(float64(m.n.Load()) / float64(done))) }
	perTurn := func(n uint64) int { return int(math.Round(float64(n) / float64(done))) }
	p := simParams{
		InboundBytes:  inbound.avg(),
		Events:        perTurn(events1 - events0),
		EventBytes:    evs.avg(),
		TapeMsgs:      perTurn(tapes1 - tapes0),
		TapeBytes:     tapes.avg(),
		TapeHeader:    tapes.appHeader(),
		OutboundBytes: outbound.avg(),
		Concurrency:   pl.e.cfg.workerConcurrency,
	}
	for i, h := range turnHooks {
		for range per(&hookMeters[i]) {
			p.Hops = append(p.Hops, hop{Hook: string(h), Bytes: hookMeters[i].avg()})
		}
	}
	if len(p.Hops) != len(turnHooks) {
		return fmt.Errorf("a real turn made %d interceptor calls, want %d (one per hook of %v)", len(p.Hops), len(turnHooks), turnHooks)
	}
	pl.params = p
	extraMu.Lock()
	defer extraMu.Unlock()
	pl.extra = map[string]float64{}
	for k, n := range extra {
		pl.extra[k] = float64(n) / float64(done)
	}
	return nil
}

// apiKind names a JetStream API request by its verb (CONSUMER.CREATE,
// STREAM.MSG.GET, DIRECT.GET, …), without stream and consumer names.
func apiKind(subject string) string {
	verb := strings.Split(strings.TrimPrefix(subject, jetstream.DefaultAPIPrefix), ".")
	n := 2
	if len(verb) > 2 && verb[0] == "STREAM" && verb[1] == "MSG" || len(verb) > 2 && verb[0] == "CONSUMER" && verb[1] == "MSG" {
		n = 3
	}
	return "JetStream API " + strings.Join(verb[:min(n, len(verb))], ".")
}

// extraMarkdown lists what a real turn does beyond the simulation.
func (pl *pipeline) extraMarkdown() string {
	if len(pl.extra) == 0 {
		return ""
	}
	keys := slices.Sorted(maps.Keys(pl.extra))
	slices.SortStableFunc(keys, func(a, b string) int { return cmp.Compare(pl.extra[b], pl.extra[a]) })
	var b strings.Builder
	b.WriteString("| operation | per real turn |\n| --- | --- |\n")
	for _, k := range keys {
		if v := pl.extra[k]; v >= 0.05 {
			fmt.Fprintf(&b, "| %s | %.2f |\n", k, v)
		}
	}
	return b.String()
}

// waitRecorded waits until the (real or sim) recorder has acknowledged
// every lifecycle event published so far.
func (pl *pipeline) waitRecorded(ctx context.Context, sim bool) error {
	names := pl.names
	if sim {
		names = simNames()
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := recorder.WaitCaughtUp(ctx, pl.conn.JS, names); err != nil {
		return fmt.Errorf("%w (%v)", err, pl.alive())
	}
	return nil
}

// cpu returns the CPU time so far of every accounted process by label.
func (pl *pipeline) cpu() map[string]time.Duration {
	m := map[string]time.Duration{}
	for l, ps := range pl.roles {
		for _, p := range ps {
			if d, err := procCPU(p.pid()); err == nil {
				m[l] += d
			}
		}
	}
	if pl.layout == distributed {
		m[lblHarness] = selfCPU()
	} else {
		m[lblAllInOne] = selfCPU()
	}
	return m
}

// throughput is one closed-loop window.
type throughput struct {
	turns, failed int
	rate          float64                  // fully recorded turns per second
	cpu           map[string]time.Duration // CPU per turn by label
	// storedMsgs and storedBytes are what the side's streams stored per
	// turn (stored.go).
	storedMsgs, storedBytes float64
}

// window runs the closed loop for d and waits until the recorder has
// recorded every turn; the rate counts turns over that whole time.
func (pl *pipeline) window(ctx context.Context, sim bool, d time.Duration, turn turnFunc) (throughput, error) {
	if turn == nil {
		turn = pl.realTurn
		if sim {
			turn = pl.simTurn
		}
	}
	stored0, err := streamTotals(ctx, pl.conn.JS, sim)
	if err != nil {
		return throughput{}, err
	}
	before := pl.cpu()
	start := time.Now()
	done, failed, _, first := closedLoop(ctx, pl.inflight, d, turn)
	if err := pl.waitRecorded(ctx, sim); err != nil {
		return throughput{}, err
	}
	elapsed := time.Since(start)
	after := pl.cpu()
	stored1, err := streamTotals(ctx, pl.conn.JS, sim)
	if err != nil {
		return throughput{}, err
	}
	t := throughput{turns: done, failed: failed, rate: float64(done) / elapsed.Seconds(), cpu: map[string]time.Duration{}}
	t.storedMsgs, t.storedBytes = stored1.perTurn(stored0, done)
	for l, v := range after {
		if done > 0 {
			t.cpu[l] = (v - before[l]) / time.Duration(done)
		}
	}
	if done == 0 {
		return t, fmt.Errorf("no turn answered (%d failed, the first with: %w): %w", failed, first, pl.alive())
	}
	return t, nil
}

// p3 measures turns/s, real and simulated, reps times interleaved.
func (pl *pipeline) p3(ctx context.Context, id, figure string, real turnFunc) (Row, cpuTable, error) {
	e := pl.e
	var fig, lim []float64
	var failed int
	cpuReal, cpuSim := map[string][]float64{}, map[string][]float64{}
	pl.stored = storedSamples{}
	for rep := range e.cfg.reps {
		e.progress.Step(fmt.Sprintf("%s %s: simulation%s", id, pl.layout, repLabel(rep, e.cfg.reps)))
		s, err := pl.window(ctx, true, e.cfg.window, nil)
		if err != nil {
			return Row{}, cpuTable{}, fmt.Errorf("simulation: %w", err)
		}
		e.progress.Step(fmt.Sprintf("%s %s: pipeline%s", id, pl.layout, repLabel(rep, e.cfg.reps)))
		r, err := pl.window(ctx, false, e.cfg.window, real)
		if err != nil {
			return Row{}, cpuTable{}, fmt.Errorf("pipeline: %w", err)
		}
		lim, fig = append(lim, s.rate), append(fig, r.rate)
		pl.stored.add(true, s.storedMsgs, s.storedBytes)
		pl.stored.add(false, r.storedMsgs, r.storedBytes)
		failed += r.failed
		for l, v := range r.cpu {
			cpuReal[l] = append(cpuReal[l], float64(v))
		}
		for l, v := range s.cpu {
			cpuSim[l] = append(cpuSim[l], float64(v))
		}
	}
	ratio := Summarize(ratios(fig, lim))
	row := Row{
		ID: id, Figure: figure, Value: Summarize(fig), Unit: PerSecond,
		LimitName: fmt.Sprintf("bare nats.go turn simulation, same pattern (%s)", pl.params.describe()),
		Limit:     Summarize(lim), Ratio: ratio, Goal: "≥ 0.7×", Result: AtLeast(ratio.Median, 0.7),
	}
	if failed > 0 {
		row.Extra = strconv.Itoa(failed) + " turns failed"
		row.Result = Fail
	}
	return row, newCPUTable(cpuReal, cpuSim), nil
}

// describe summarises the pattern for the limit column.
func (p simParams) describe() string {
	hops := make([]string, len(p.Hops))
	for i, h := range p.Hops {
		hops[i] = strconv.Itoa(h.Bytes) + " B"
	}
	tapeHeader := ""
	if len(p.TapeHeader) > 0 {
		tapeHeader = " + header " + strings.Join(slices.Sorted(maps.Keys(p.TapeHeader)), ", ")
	}
	return fmt.Sprintf("1 inbound publish %d B, %d request/replies %s, %d event publishes × %d B, 1 outbound publish %d B, recorder writing %d tape messages × %d B%s",
		p.InboundBytes, len(p.Hops), strings.Join(hops, " + "), p.Events, p.EventBytes, p.OutboundBytes, p.TapeMsgs, p.TapeBytes, tapeHeader)
}

// p4 measures latency at a fixed rate, HTTP in → outbound beside the
// simulation at the same rate, reps times interleaved.
func (pl *pipeline) p4(ctx context.Context, id, figure string) ([]Row, error) {
	e := pl.e
	rate := e.cfg.rate
	e.progress.Show(fmt.Sprintf("%s %s: warm-up at %d turns/s", id, pl.layout, rate))
	openLoop(ctx, rate, e.cfg.warmup, pl.simTurn)
	openLoop(ctx, rate, e.cfg.warmup, pl.httpTurn)
	var f50, f99, l50, l99 []float64
	failed := 0
	for rep := range e.cfg.reps {
		e.progress.Step(fmt.Sprintf("%s %s: simulation at %d/s%s", id, pl.layout, rate, repLabel(rep, e.cfg.reps)))
		s, sf := openLoop(ctx, rate, e.cfg.latencyWindow, pl.simTurn)
		e.progress.Step(fmt.Sprintf("%s %s: HTTP at %d/s%s", id, pl.layout, rate, repLabel(rep, e.cfg.reps)))
		r, rf := openLoop(ctx, rate, e.cfg.latencyWindow, pl.httpTurn)
		if len(s) == 0 || len(r) == 0 {
			return nil, fmt.Errorf("%s: no turn answered (%d sim, %d real failed): %w", id, sf, rf, pl.alive())
		}
		failed += rf
		l50, l99 = append(l50, float64(s.P50())), append(l99, float64(s.P99()))
		f50, f99 = append(f50, float64(r.P50())), append(f99, float64(r.P99()))
		if err := pl.waitRecorded(ctx, false); err != nil {
			return nil, err
		}
	}
	mk := func(pct string, fig, lim []float64, bound float64) Row {
		ratio := Summarize(ratios(fig, lim))
		row := Row{
			ID: id, Figure: fmt.Sprintf("%s, %s", figure, pct), Value: Summarize(fig), Unit: Nanos,
			LimitName: fmt.Sprintf("the simulation at %d turns/s, %s", rate, pct),
			Limit:     Summarize(lim), Ratio: ratio, Goal: fmt.Sprintf("≤ %g×", bound), Result: AtMost(ratio.Median, bound),
		}
		if failed > 0 {
			row.Extra = strconv.Itoa(failed) + " turns failed"
			row.Result = Fail
		}
		return row
	}
	return []Row{mk("p50", f50, l50, 2), mk("p99", f99, l99, 3)}, nil
}

// cpuTable is the CPU per turn by process, median over repetitions.
type cpuTable struct {
	labels    []string
	real, sim map[string]float64 // ns per turn
}

func newCPUTable(real, sim map[string][]float64) cpuTable {
	t := cpuTable{real: map[string]float64{}, sim: map[string]float64{}}
	seen := map[string]bool{}
	for l, v := range real {
		t.real[l] = Summarize(v).Median
		seen[l] = true
	}
	for l, v := range sim {
		t.sim[l] = Summarize(v).Median
		seen[l] = true
	}
	order := []string{lblServer, lblIngress, lblWorker, lblRecorder, lblInterceptor, lblSimWorker, lblSimRecorder, lblHarness, lblAllInOne}
	for _, l := range order {
		if seen[l] && (t.real[l] >= float64(10*time.Microsecond) || t.sim[l] >= float64(10*time.Microsecond)) {
			t.labels = append(t.labels, l)
		}
	}
	return t
}

func (t cpuTable) total(real bool) float64 {
	var s float64
	for _, l := range t.labels {
		if real {
			s += t.real[l]
		} else {
			s += t.sim[l]
		}
	}
	return s
}

// markdown renders the table.
func (t cpuTable) markdown() string {
	var b strings.Builder
	b.WriteString("| process | pipeline CPU per turn | simulation CPU per turn |\n| --- | --- | --- |\n")
	us := func(v float64) string {
		if v < float64(10*time.Microsecond) {
			return "—"
		}
		return strconv.FormatFloat(v/1e3, 'f', 0, 64) + " µs"
	}
	for _, l := range t.labels {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", l, us(t.real[l]), us(t.sim[l]))
	}
	fmt.Fprintf(&b, "| **total** | **%s** | **%s** |\n", us(t.total(true)), us(t.total(false)))
	return b.String()
}
