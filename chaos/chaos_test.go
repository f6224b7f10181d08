//go:build chaos

package chaos

import (
	"context"
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
	"github.com/bubbus/bub/internal/freeport"
	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/proctest"
	"github.com/bubbus/bub/internal/turnload"
	"github.com/bubbus/bub/pkg/subjects"
)

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
	// inFlightAtKills sums the model calls in flight (on every worker)
	// when a worker was killed: the most provider calls a kill can make
	// the cluster repeat.
	inFlightAtKills atomic.Int64

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

// target is the deployment as the load and its accounting see it.
func (c *cluster) target() turnload.Target {
	return turnload.Target{Name: c.name, Web: c.web, JS: c.js}
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
	ports, err := freeport.Ports(2 * n) // distinct: client ports, then route ports
	if err != nil {
		c.t.Fatal(err)
	}
	var routes, urls []string
	for i := range n {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ports[n+i]))
	}
	for i := range n {
		name := fmt.Sprintf("n%d", i+1)
		c.servers = append(c.servers, &natsServer{name: name, args: []string{
			"--server_name", name, "-js", "-sd", c.t.TempDir(), "-a", "127.0.0.1", "-p", strconv.Itoa(ports[i]),
			"--cluster_name", "chaos", "--cluster", fmt.Sprintf("nats://127.0.0.1:%d", ports[n+i]), "--routes", strings.Join(routes, ","),
		}})
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", ports[i]))
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
		turnload.Sleep(context.Background(), down)
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
	c.inFlightAtKills.Add(int64(c.fake.InFlight()))
	w.Kill()
	c.mu.Lock()
	c.nworkers++
	c.workers[i] = c.service("worker", "BUB_INSTANCE="+fmt.Sprintf("%s-w%d", c.name, c.nworkers), "BUB_WORKSPACE="+c.t.TempDir())
	c.mu.Unlock()
}

// TestChaosKillWorkers SIGKILLs a random worker (of three) at random
// points while the turns flow; each is replaced at once.
func TestChaosKillWorkers(t *testing.T) {
	l := turnload.FromEnv(t, "BUB_CHAOS", turnload.Load{Turns: 1000, Sessions: 50, Rate: 50})
	c := newCluster(t, clusterOpts{name: "workers", workers: 3})
	r := turnload.Run(t, "chaos", c.target(), l, func(ctx context.Context, p *turnload.Pace) int {
		return turnload.Every(ctx, p, 500*time.Millisecond, 2*time.Second, func() {
			c.killWorker(rand.N(len(c.workers)))
		})
	})
	// Killed workers' turns resume from their recorded steps: the model is
	// called at most once per turn plus once per call in flight at a kill
	// (a call interrupted mid-stream is made again; a completed one never
	// is), and no run on the tapes was interrupted and then run again.
	calls, inFlight := len(c.fake.Requests()), int(c.inFlightAtKills.Load())
	line := fmt.Sprintf("chaos[%s] provider_calls=%d provider_calls_per_turn=%.3f in_flight_at_kills=%d provider_goal_per_turn=%.3f",
		c.name, calls, float64(calls)/float64(r.Sent), inFlight, 1+float64(inFlight)/float64(r.Sent))
	fmt.Println(line)
	t.Log(line)
	if calls > r.Sent+inFlight {
		t.Errorf("%s: %d provider calls for %d turns with %d calls in flight at kills: completed calls were made again", c.name, calls, r.Sent, inFlight)
	}
	if r.Interrupted != 0 {
		t.Errorf("%s: %d interrupted runs on the tapes: a redelivered turn ran again instead of resuming", c.name, r.Interrupted)
	}
}

// TestChaosRestartRecorder kills the recorder with SIGKILL a third into
// the load and brings it back two seconds later, then stops it with
// SIGTERM two thirds in and restarts it at once.
func TestChaosRestartRecorder(t *testing.T) {
	l := turnload.FromEnv(t, "BUB_CHAOS", turnload.Load{Turns: 1000, Sessions: 50, Rate: 50})
	c := newCluster(t, clusterOpts{name: "recorder", workers: 2})
	turnload.Run(t, "chaos", c.target(), l, func(ctx context.Context, p *turnload.Pace) int {
		n := 0
		if p.WaitFor(ctx, 0.33) {
			p.Mark()
			c.recorder.Kill()
			turnload.Sleep(context.Background(), 2*time.Second)
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
	l := turnload.FromEnv(t, "BUB_CHAOS", turnload.Load{Turns: 1000, Sessions: 50, Rate: 50})
	c := newCluster(t, clusterOpts{name: "nats", workers: 2})
	turnload.Run(t, "chaos", c.target(), l, func(ctx context.Context, p *turnload.Pace) int {
		if !p.WaitFor(ctx, 0.4) {
			return 0
		}
		p.Mark()
		c.nats.Kill()
		turnload.Sleep(context.Background(), 2*time.Second)
		c.startNATS()
		p.Mark()
		return 1
	})
}

// TestChaosClusterLeaderLoss runs three nats-server processes in one
// cluster with every stream, bucket and shared consumer at three
// replicas, three workers and the recorder. 40% into the load the server
// leading the inbound stream is killed (SIGKILL) and restarted on the
// same ports and store three seconds later. Probe turns, each in a new
// session, measure the first answer after the kill (printed; the goal is
// 10s).
func TestChaosClusterLeaderLoss(t *testing.T) {
	l := turnload.FromEnv(t, "BUB_CHAOS", turnload.Load{Turns: 1000, Sessions: 50, Rate: 50})
	c := newCluster(t, clusterOpts{name: "cluster", workers: 3, servers: 3})
	turnload.Run(t, "chaos", c.target(), l, func(ctx context.Context, p *turnload.Pace) int {
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
		start := time.Now()
		answered := make(chan time.Duration, 1)
		go func() { answered <- turnload.FirstAnswer(c.web, start) }()
		c.restartServer(leader, 3*time.Second)
		p.Mark()
		line := fmt.Sprintf("chaos[%s] first answer after the kill of %s (leader of %s): %s", c.name, leader, subjects.Default().InboundStream(), (<-answered).Round(100*time.Millisecond))
		fmt.Println(line)
		t.Log(line)
		return 1
	})
}

// TestChaosInterceptors runs every turn through four interceptors: the
// example policy (before_tool_call), a slow one, a dead one (configured,
// never started) and one answering garbage (before_llm_call, fail-open).
// Mid-load the slow one is killed, a worker is killed, and the slow one
// comes back.
func TestChaosInterceptors(t *testing.T) {
	l := turnload.FromEnv(t, "BUB_CHAOS", turnload.Load{Turns: 1000, Sessions: 50, Rate: 50})
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
	turnload.Run(t, "chaos", c.target(), l, func(ctx context.Context, p *turnload.Pace) int {
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
