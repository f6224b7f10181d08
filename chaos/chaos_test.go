//go:build chaos

package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/proctest"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/subjects"
	"github.com/bubbus/bub/pkg/tape"
)

// load sizes one scenario's traffic.
type load struct {
	turns, sessions int
	rate            float64 // turns per second
}

func loadFromEnv(t *testing.T) load {
	t.Helper()
	l := load{turns: 1000, sessions: 50, rate: 50}
	num := func(key string, p *int) {
		if v := os.Getenv(key); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				t.Fatalf("%s=%q: want a positive number", key, v)
			}
			*p = n
		}
	}
	num("BUB_CHAOS_TURNS", &l.turns)
	num("BUB_CHAOS_SESSIONS", &l.sessions)
	if v := os.Getenv("BUB_CHAOS_RATE"); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || r <= 0 {
			t.Fatalf("BUB_CHAOS_RATE=%q: want turns per second", v)
		}
		l.rate = r
	}
	return l
}

// cluster is one deployment of separate processes on loopback.
type cluster struct {
	t        *testing.T
	name     string
	home     string
	natsAddr string
	natsURL  string
	env      []string
	web      string
	fake     *fakellm.Server

	mu   sync.Mutex
	nats *proctest.Proc
	// servers are the nats-server processes of a 3-server cluster
	// (clusterOpts.servers), nil for `bub up`'s embedded one.
	servers  []*natsServer
	ingress  *proctest.Proc
	workers  []*proctest.Proc
	recorder *proctest.Proc
	nworkers int

	nc *nats.Conn
	js jetstream.JetStream
}

// clusterOpts shape a [cluster].
type clusterOpts struct {
	name    string
	workers int
	// env is added to every service's environment.
	env []string
	// before runs once NATS is up, before the services start.
	before func(*cluster)
	// servers, when above 1, runs that many nats-server processes in one
	// cluster (instead of `bub up`'s embedded server), with every stream,
	// bucket and shared consumer replicated on each.
	servers int
}

// newCluster starts NATS (`bub up --services=`), ingress, the workers and
// the recorder.
func newCluster(t *testing.T, o clusterOpts) *cluster {
	t.Helper()
	name, workers, extra := o.name, o.workers, o.env
	fake, base := fakellm.Start(t, fakellm.Script{Steps: []fakellm.Step{
		{Echo: true, Repeat: true, Delay: fakellm.Duration(100 * time.Millisecond), ChunkDelay: fakellm.Duration(5 * time.Millisecond)},
	}})
	c := &cluster{t: t, name: name, home: t.TempDir(), natsAddr: proctest.FreeAddr(t), fake: fake}
	c.natsURL = "nats://" + c.natsAddr
	if o.servers > 1 {
		c.natsURL = c.planServers(o.servers)
		extra = append([]string{"BUB_REPLICAS=" + strconv.Itoa(o.servers)}, extra...)
	}
	c.env = append([]string{
		"BUB_NATS_URL=" + c.natsURL, "BUB_HOME=" + c.home,
		"BUB_MODEL=openai:fake", "BUB_API_BASE=" + base, "BUB_API_KEY=x",
		"BUB_ACK_WAIT=3s", "BUB_TURN_TTL=3s", "BUB_RECORDER_ACK_WAIT=5s", "BUB_SHUTDOWN_GRACE=5s",
		"BUB_LOG_LEVEL=info",
	}, extra...)
	if o.servers > 1 {
		c.startServers()
	} else {
		c.startNATS()
	}
	nc, err := nats.Connect(c.natsURL, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond), nats.RetryOnFailedConnect(true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c.nc = nc
	if c.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	if o.before != nil {
		o.before(c)
	}
	httpAddr := proctest.FreeAddr(t)
	c.web = "http://" + httpAddr
	c.ingress = proctest.Start(t, proctest.Binary(t, "ingress"), c.env, "--http", httpAddr)
	c.recorder = c.service("recorder")
	for range workers {
		c.addWorker()
	}
	natstest.Eventually(t, 60*time.Second, func() (bool, string) {
		resp, err := http.Get(c.web + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, "ingress not ready"
	})
	c.waitConsumers(workers)
	return c
}

func (c *cluster) service(name string, extra ...string) *proctest.Proc {
	return proctest.Start(c.t, proctest.Binary(c.t, name), append(append([]string(nil), c.env...), extra...))
}

func (c *cluster) startNATS() {
	c.mu.Lock()
	defer c.mu.Unlock()
	var env []string // the services' environment, without the URL that would make `bub up` a client
	for _, kv := range c.env {
		if !strings.HasPrefix(kv, "BUB_NATS_URL=") {
			env = append(env, kv)
		}
	}
	c.nats = proctest.Start(c.t, proctest.Binary(c.t, "bub"), append(env, "BUB_NATS_URL="), "up", "--services=", "--nats-listen", c.natsAddr, "--home", c.home)
	c.waitJetStream("streams not ready", func(ctx context.Context, js jetstream.JetStream) error {
		_, err := js.Stream(ctx, subjects.Default().InboundStream())
		return err
	})
}

// waitJetStream waits up to a minute until NATS answers and ready holds
// on a fresh connection; missing says what is missing meanwhile.
func (c *cluster) waitJetStream(missing string, ready func(ctx context.Context, js jetstream.JetStream) error) {
	natstest.Eventually(c.t, 60*time.Second, func() (bool, string) {
		nc, err := nats.Connect(c.natsURL, nats.MaxReconnects(0), nats.Timeout(time.Second))
		if err != nil {
			return false, "nats: " + err.Error()
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		err = ready(ctx, js)
		return err == nil, fmt.Sprintf("nats up, %s: %v", missing, err)
	})
}

// natsServer is one nats-server process of a cluster: its name and
// arguments (the same on a restart: same ports and store).
type natsServer struct {
	name string
	args []string
	proc *proctest.Proc
}

// planServers picks the ports of n cluster servers and returns their
// client URLs, comma-separated.
func (c *cluster) planServers(n int) string {
	var routes, urls []string
	clusterAddrs := make([]string, n)
	for i := range n {
		clusterAddrs[i] = proctest.FreeAddr(c.t)
		routes = append(routes, "nats-route://"+clusterAddrs[i])
	}
	for i := range n {
		host, port, _ := strings.Cut(proctest.FreeAddr(c.t), ":")
		chost, cport, _ := strings.Cut(clusterAddrs[i], ":")
		name := fmt.Sprintf("n%d", i+1)
		c.servers = append(c.servers, &natsServer{name: name, args: []string{
			"--server_name", name, "-js", "-sd", c.t.TempDir(), "-a", host, "-p", port,
			"--cluster_name", "chaos", "--cluster", "nats://" + chost + ":" + cport, "--routes", strings.Join(routes, ","),
		}})
		urls = append(urls, "nats://"+host+":"+port)
	}
	return strings.Join(urls, ",")
}

// startServers starts the cluster's nats-server processes, waits until
// JetStream answers, and provisions the topology (`bub provision`, with
// the services' BUB_REPLICAS) as an operator would.
func (c *cluster) startServers() {
	bin := proctest.Build(c.t, "github.com/nats-io/nats-server/v2")
	for _, s := range c.servers {
		s.proc = proctest.Start(c.t, bin, nil, s.args...)
	}
	c.waitJetStream("no JetStream yet", func(ctx context.Context, js jetstream.JetStream) error {
		_, err := js.AccountInfo(ctx)
		return err
	})
	cmd := exec.Command(proctest.Binary(c.t, "bub"), "provision")
	cmd.Env = append(os.Environ(), c.env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		c.t.Fatalf("bub provision: %v\n%s", err, out)
	}
}

// restartServer SIGKILLs the server named name and starts it again on the
// same ports and store after down.
func (c *cluster) restartServer(name string, down time.Duration) {
	for _, s := range c.servers {
		if s.name != name {
			continue
		}
		s.proc.Kill()
		sleepCtx(context.Background(), down)
		s.proc = proctest.Start(c.t, proctest.Build(c.t, "github.com/nats-io/nats-server/v2"), nil, s.args...)
		return
	}
	c.t.Errorf("no server %s", name)
}

// streamLeader returns the server name leading stream ("" when unknown).
func (c *cluster) streamLeader(stream string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := c.js.Stream(ctx, stream)
	if err != nil {
		return ""
	}
	info, err := st.Info(ctx)
	if err != nil || info.Cluster == nil {
		return ""
	}
	return info.Cluster.Leader
}

func (c *cluster) addWorker() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nworkers++
	w := c.service("worker", "BUB_INSTANCE="+fmt.Sprintf("%s-w%d", c.name, c.nworkers), "BUB_WORKSPACE="+c.t.TempDir())
	c.workers = append(c.workers, w)
}

// waitConsumers waits until n workers pull from the shared consumer.
func (c *cluster) waitConsumers(n int) {
	names := subjects.Default()
	natstest.Eventually(c.t, 60*time.Second, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		cons, err := c.js.Consumer(ctx, names.InboundStream(), names.WorkerConsumer())
		if err != nil {
			return false, err.Error()
		}
		info, err := cons.Info(ctx)
		if err != nil {
			return false, err.Error()
		}
		return info.NumWaiting >= n, fmt.Sprintf("%d of %d workers pulling", info.NumWaiting, n)
	})
}

// killWorker SIGKILLs worker i and starts a replacement.
func (c *cluster) killWorker(i int) {
	c.mu.Lock()
	w := c.workers[i]
	c.mu.Unlock()
	w.Kill()
	c.mu.Lock()
	c.nworkers++
	c.workers[i] = c.service("worker", "BUB_INSTANCE="+fmt.Sprintf("%s-w%d", c.name, c.nworkers), "BUB_WORKSPACE="+c.t.TempDir())
	c.mu.Unlock()
}

// turn is one message of the load.
type turn struct {
	id, session string
}

func (tr turn) content() string { return "chaos turn " + tr.id + "." }

// send posts every turn at the load's rate; a failed post is retried
// with the same id (ingress deduplicates) until accepted. It returns when
// every turn was accepted.
func (c *cluster) send(l load) []turn {
	turns := make([]turn, l.turns)
	for i := range turns {
		turns[i] = turn{id: fmt.Sprintf("%s-%05d", c.name, i), session: fmt.Sprintf("%s:s%02d", c.name, i%l.sessions)}
	}
	interval := time.Duration(float64(time.Second) / l.rate)
	var wg sync.WaitGroup
	var failures atomic.Int64
	start := time.Now()
	for i, tr := range turns {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d) // pacing the load generator, not waiting for a condition
		}
		wg.Go(func() {
			deadline := time.Now().Add(3 * time.Minute)
			for {
				if err := c.post(tr); err == nil {
					return
				} else if time.Now().After(deadline) {
					c.t.Errorf("turn %s never accepted: %v", tr.id, err)
					return
				}
				failures.Add(1)
				time.Sleep(200 * time.Millisecond) // client retry backoff
			}
		})
	}
	wg.Wait()
	if n := failures.Load(); n > 0 {
		c.t.Logf("%s: %d posts retried", c.name, n)
	}
	return turns
}

func (c *cluster) post(tr turn) error {
	b, _ := json.Marshal(map[string]any{"id": tr.id, "content": tr.content(), "session_id": tr.session})
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Post(c.web+"/v1/messages", "application/json", bytes.NewReader(b))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST: %s", resp.Status)
	}
	return nil
}

// result is what a scenario measured.
type result struct {
	sent, replied, duplicates, lost, errors int
	tapeExpected, tapeFound, tapeDuplicates int
	interrupted, deadLetters, held          int
	actions                                 int
	recover, elapsed                        time.Duration
	// completeAt is when every reply and tape entry was there.
	completeAt time.Time
}

func (r result) String() string {
	return fmt.Sprintf("turns_sent=%d replies=%d duplicates=%d lost=%d error_replies=%d tape_expected=%d tape_found=%d tape_duplicates=%d interrupted_runs=%d held_events=%d dead_letters=%d chaos_actions=%d recover=%s elapsed=%s",
		r.sent, r.replied, r.duplicates, r.lost, r.errors, r.tapeExpected, r.tapeFound, r.tapeDuplicates, r.interrupted, r.held, r.deadLetters, r.actions,
		r.recover.Round(10*time.Millisecond), r.elapsed.Round(10*time.Millisecond))
}

// replies counts the outbound envelopes per inbound id and the error ones.
func (c *cluster) replies(ctx context.Context) (per map[string]int, errs int, err error) {
	names := subjects.Default()
	st, err := c.js.Stream(ctx, names.OutboundStream())
	if err != nil {
		return nil, 0, err
	}
	per = map[string]int{}
	seen := map[string]bool{}
	for next := uint64(1); ; {
		raw, err := st.GetMsg(ctx, next, jetstream.WithGetMsgSubject(names.OutboundAll()))
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				return per, errs, nil
			}
			return nil, 0, err
		}
		next = raw.Sequence + 1
		ev, err := events.Decode(raw.Header, raw.Data)
		if err != nil {
			return nil, 0, fmt.Errorf("outbound %d: %w", raw.Sequence, err)
		}
		var env envelope.Envelope
		if err := events.DecodeData(ev, &env); err != nil {
			return nil, 0, err
		}
		per[env.InReplyTo]++
		if env.Kind == envelope.KindError && !seen[env.InReplyTo] {
			errs++
			seen[env.InReplyTo] = true
		}
	}
}

// tapes counts, per turn id, the user messages on the tapes that carry
// the turn's content, and the interrupted runs.
func (c *cluster) tapes(ctx context.Context, l load) (per map[string]int, interrupted int, err error) {
	store, err := tape.NewJetStreamStore(ctx, c.js, subjects.Default())
	if err != nil {
		return nil, 0, err
	}
	per = map[string]int{}
	for s := range l.sessions {
		entries, err := store.Fetch(ctx, fmt.Sprintf("%s:s%02d", c.name, s), tape.All())
		if err != nil {
			return nil, 0, err
		}
		for _, e := range entries {
			if e.Kind == tape.KindEvent && e.Payload["name"] == "run.interrupted" {
				interrupted++
			}
			if e.Kind != tape.KindMessage || e.Payload["role"] != "user" {
				continue
			}
			text := fmt.Sprint(e.Payload["content"])
			if i := strings.Index(text, "chaos turn "); i >= 0 {
				id, _, _ := strings.Cut(text[i+len("chaos turn "):], ".")
				per[id]++
			}
		}
	}
	return per, interrupted, nil
}

// recorderBacklog returns how many lifecycle events the recorder has not
// taken yet and how many it holds unacknowledged (-1, -1 when unknown).
func (c *cluster) recorderBacklog(ctx context.Context) (pending, held int) {
	names := subjects.Default()
	cons, err := c.js.Consumer(ctx, names.EventsStream(), names.RecorderConsumer())
	if err != nil {
		return -1, -1
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return -1, -1
	}
	return int(info.NumPending), info.NumAckPending
}

// heldGrace is how long a settled scenario waits for the recorder to let
// go of the events it still holds: those of a run whose run.started was
// lost in a NATS outage stay held until the recorder's idle-run timeout
// records the run as interrupted (reported as held_events).
const heldGrace = 20 * time.Second

// settle waits until every turn has its reply and its tape entries and
// the recorder took every event (or the deadline passes), then measures
// the result.
func (c *cluster) settle(turns []turn, l load, within time.Duration) result {
	r := result{sent: len(turns), tapeExpected: len(turns)}
	deadline := time.Now().Add(within)
	var complete time.Time // when replies and tapes were first complete
	poll := time.NewTicker(500 * time.Millisecond)
	defer poll.Stop()
	for ; ; <-poll.C {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		per, errs, rerr := c.replies(ctx)
		var tapes map[string]int
		var interrupted int
		var terr error
		pending, held := -1, -1
		if rerr == nil {
			tapes, interrupted, terr = c.tapes(ctx, l)
			pending, held = c.recorderBacklog(ctx)
		}
		cancel()
		if rerr == nil && terr == nil {
			r.replied, r.duplicates, r.lost, r.errors = 0, 0, 0, errs
			r.tapeFound, r.tapeDuplicates, r.interrupted = 0, 0, interrupted
			for _, tr := range turns {
				switch n := per[tr.id]; {
				case n == 0:
					r.lost++
				default:
					r.replied++
					r.duplicates += n - 1
				}
				if n := tapes[tr.id]; n > 0 {
					r.tapeFound++
					r.tapeDuplicates += n - 1
				}
			}
			r.held = held
			if r.lost == 0 && r.tapeFound == r.tapeExpected && pending == 0 {
				if complete.IsZero() {
					complete = time.Now()
				}
				if held == 0 || time.Since(complete) > heldGrace {
					r.completeAt = complete
					return r
				}
			}
		}
		if time.Now().After(deadline) {
			c.t.Errorf("%s: not settled within %v (replies err %v, tapes err %v, recorder backlog %d, held %d)", c.name, within, rerr, terr, pending, held)
			c.explainRecorder()
			return r
		}
	}
}

// pace tells chaos actions how far the load is and records when the
// latest action happened.
type pace struct {
	start time.Time
	span  time.Duration // planned duration of the load
	last  atomic.Int64  // unix nanos of the latest action
}

// Progress is the fraction of the planned load duration that passed.
func (p *pace) Progress() float64 { return float64(time.Since(p.start)) / float64(p.span) }

// Mark records a chaos action now.
func (p *pace) Mark() { p.last.Store(time.Now().UnixNano()) }

// WaitFor waits until the load is at least at fraction, false when ctx
// ends first.
func (p *pace) WaitFor(ctx context.Context, fraction float64) bool {
	for p.Progress() < fraction {
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return false
		}
	}
	return ctx.Err() == nil
}

// scenario runs the load on c while chaos runs (until the load is sent),
// then settles, prints the summary line and checks it. chaos returns how
// many actions it took.
func scenario(t *testing.T, c *cluster, l load, chaos func(ctx context.Context, p *pace) int) {
	p := &pace{start: time.Now(), span: time.Duration(float64(l.turns) / l.rate * float64(time.Second))}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var actions int
	done := make(chan struct{})
	go func() {
		defer close(done)
		actions = chaos(ctx, p)
	}()
	turns := c.send(l)
	cancel()
	<-done
	last := time.Now()
	if n := p.last.Load(); n != 0 {
		last = time.Unix(0, n)
	}
	r := c.settle(turns, l, 4*time.Minute)
	r.actions = actions
	r.elapsed = time.Since(p.start)
	r.deadLetters = c.deadLetters()
	r.recover = time.Since(last)
	if !r.completeAt.IsZero() {
		r.recover = r.completeAt.Sub(last)
	}
	line := fmt.Sprintf("chaos[%s] %s", c.name, r)
	fmt.Println(line)
	t.Log(line)
	if r.lost != 0 || r.duplicates != 0 || r.tapeDuplicates != 0 || r.tapeFound != r.tapeExpected {
		t.Errorf("%s: lost %d, duplicate replies %d, duplicate tape entries %d, tape %d/%d", c.name, r.lost, r.duplicates, r.tapeDuplicates, r.tapeFound, r.tapeExpected)
	}
}

// every runs action at random intervals in [lo, hi) until ctx ends and
// returns how often it ran.
func every(ctx context.Context, p *pace, lo, hi time.Duration, action func()) int {
	n := 0
	for sleepCtx(ctx, lo+rand.N(hi-lo)) {
		p.Mark()
		action()
		n++
	}
	return n
}

// sleepCtx pauses between chaos actions; false when ctx ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// TestChaosKillWorkers SIGKILLs a random worker (of three) at random
// points while the turns flow; each is replaced at once.
func TestChaosKillWorkers(t *testing.T) {
	l := loadFromEnv(t)
	c := newCluster(t, clusterOpts{name: "workers", workers: 3})
	scenario(t, c, l, func(ctx context.Context, p *pace) int {
		return every(ctx, p, 500*time.Millisecond, 2*time.Second, func() {
			c.killWorker(rand.N(len(c.workers)))
		})
	})
}

// TestChaosRestartRecorder kills the recorder with SIGKILL a third into
// the load and brings it back two seconds later, then stops it with
// SIGTERM two thirds in and restarts it at once.
func TestChaosRestartRecorder(t *testing.T) {
	l := loadFromEnv(t)
	c := newCluster(t, clusterOpts{name: "recorder", workers: 2})
	scenario(t, c, l, func(ctx context.Context, p *pace) int {
		n := 0
		if p.WaitFor(ctx, 0.33) {
			p.Mark()
			c.recorder.Kill()
			sleepCtx(context.Background(), 2*time.Second)
			c.recorder = c.service("recorder")
			n++
		}
		if p.WaitFor(ctx, 0.66) {
			p.Mark()
			if err := c.recorder.Stop(30 * time.Second); err != nil {
				t.Errorf("recorder SIGTERM: %v", err)
			}
			c.recorder = c.service("recorder")
			n++
		}
		return n
	})
}

// TestChaosRestartNATS kills the NATS server (SIGKILL) 40% into the load
// and restarts it on the same address and store two seconds later.
func TestChaosRestartNATS(t *testing.T) {
	l := loadFromEnv(t)
	c := newCluster(t, clusterOpts{name: "nats", workers: 2})
	scenario(t, c, l, func(ctx context.Context, p *pace) int {
		if !p.WaitFor(ctx, 0.4) {
			return 0
		}
		p.Mark()
		c.nats.Kill()
		sleepCtx(context.Background(), 2*time.Second)
		c.startNATS()
		p.Mark()
		return 1
	})
}

// TestChaosClusterLeaderLoss runs three nats-server processes in one
// cluster with every stream, bucket and shared consumer at three
// replicas, three workers and the recorder. 40% into the load the server
// leading the inbound stream is killed (SIGKILL) and restarted on the
// same ports and store three seconds later.
func TestChaosClusterLeaderLoss(t *testing.T) {
	l := loadFromEnv(t)
	c := newCluster(t, clusterOpts{name: "cluster", workers: 3, servers: 3})
	scenario(t, c, l, func(ctx context.Context, p *pace) int {
		if !p.WaitFor(ctx, 0.4) {
			return 0
		}
		leader := c.streamLeader(subjects.Default().InboundStream())
		if leader == "" {
			t.Error("the inbound stream has no leader")
			return 0
		}
		p.Mark()
		t.Logf("killing %s, leader of %s", leader, subjects.Default().InboundStream())
		c.restartServer(leader, 3*time.Second)
		p.Mark()
		return 1
	})
}

// TestChaosInterceptors runs every turn through four interceptors: the
// example policy (before_tool_call), a slow one, a dead one (configured,
// never started) and one answering garbage (before_llm_call, fail-open).
// Mid-load the slow one is killed, a worker is killed, and the slow one
// comes back.
func TestChaosInterceptors(t *testing.T) {
	l := loadFromEnv(t)
	hook := proctest.Build(t, "./chaos/cmd/chaoshook")
	var slow *proctest.Proc
	startSlow := func(c *cluster) {
		slow = proctest.Start(t, hook, c.env, "--nats", c.natsURL, "--name", "slow", "--mode", "slow", "--delay", "50ms")
	}
	c := newCluster(t, clusterOpts{name: "hooks", workers: 2,
		env: []string{
			"BUB_INTERCEPTORS=policy,slow,dead,garbage",
			"BUB_INTERCEPTOR_POLICY_HOOKS=before_tool_call",
			"BUB_INTERCEPTOR_SLOW_HOOKS=before_llm_call", "BUB_INTERCEPTOR_SLOW_TIMEOUT=500ms",
			"BUB_INTERCEPTOR_DEAD_HOOKS=before_llm_call", "BUB_INTERCEPTOR_DEAD_TIMEOUT=200ms",
			"BUB_INTERCEPTOR_GARBAGE_HOOKS=before_llm_call", "BUB_INTERCEPTOR_GARBAGE_TIMEOUT=200ms",
		},
		before: func(c *cluster) {
			proctest.Start(t, proctest.Binary(t, "policy"), c.env, "--nats", c.natsURL, "--deny-tools", "fs.write")
			proctest.Start(t, hook, c.env, "--nats", c.natsURL, "--name", "garbage", "--mode", "garbage")
			startSlow(c)
		},
	})
	scenario(t, c, l, func(ctx context.Context, p *pace) int {
		n := 0
		if p.WaitFor(ctx, 0.3) {
			p.Mark()
			slow.Kill()
			n++
		}
		if p.WaitFor(ctx, 0.5) {
			p.Mark()
			c.killWorker(0)
			n++
		}
		if p.WaitFor(ctx, 0.7) {
			p.Mark()
			startSlow(c)
			n++
		}
		return n
	})
}

// deadLetters counts the messages in the dead-letter stream.
func (c *cluster) deadLetters() int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := c.js.Stream(ctx, subjects.Default().DLQStream())
	if err != nil {
		return -1
	}
	info, err := st.Info(ctx)
	if err != nil {
		return -1
	}
	return int(info.State.Msgs)
}

// explainRecorder logs what the recorder still holds (a failed run's
// diagnosis).
func (c *cluster) explainRecorder() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	names := subjects.Default()
	cons, err := c.js.Consumer(ctx, names.EventsStream(), names.RecorderConsumer())
	if err != nil {
		c.t.Logf("recorder consumer: %v", err)
		return
	}
	info, err := cons.Info(ctx)
	if err != nil {
		c.t.Logf("recorder consumer: %v", err)
		return
	}
	c.t.Logf("recorder consumer: pending %d, ack pending %d, redelivered %d, delivered %d, ack floor %d",
		info.NumPending, info.NumAckPending, info.NumRedelivered, info.Delivered.Stream, info.AckFloor.Stream)
	st, err := c.js.Stream(ctx, names.EventsStream())
	if err != nil {
		return
	}
	shown := 0
	for seq := info.AckFloor.Stream + 1; seq <= info.Delivered.Stream && shown < 40; seq++ {
		raw, err := st.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		ev, err := events.Decode(raw.Header, raw.Data)
		if err != nil {
			continue
		}
		c.t.Logf("  event %d %s run %s seq %d session %s", seq, ev.Type(), events.RunID(ev), events.Seq(ev), events.SessionID(ev))
		shown++
	}
}
