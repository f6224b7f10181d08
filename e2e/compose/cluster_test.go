//go:build compose

package compose

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/proctest"
	"github.com/bubbus/bub/internal/turnload"
)

// threeServers is the cluster profile of deploy/compose.yaml
// (cluster.env): nats, nats-2 and nats-3 in one JetStream cluster, R3.
// Their client ports are fixed free ones, so a restarted server is found
// again on the host.
func threeServers(t *testing.T) clusterOpts {
	// The shipped delivery settings (BUB_ACK_WAIT 30s): no worker dies
	// here, and a shorter ack wait than a consumer's leader election
	// redelivers every turn in flight whose progress acks the election
	// lost, while it still runs.
	var env []string
	for _, v := range []string{"BUB_NATS_PUBLISH", "BUB_NATS2_PUBLISH", "BUB_NATS3_PUBLISH"} {
		env = append(env, v+"="+proctest.FreeAddr(t))
	}
	return clusterOpts{
		project:   "bubcluster",
		turnDelay: "100ms",
		global:    []string{"--env-file", "$DEPLOY/cluster.env", "--profile", "cluster"},
		env:       env,
	}
}

// natsServices are the compose services of the three servers, by server
// name (nats-cluster.conf).
var natsServices = map[string]string{"nats-1": "nats", "nats-2": "nats-2", "nats-3": "nats-3"}

// TestComposeClusterFaults is `make e2e-cluster`: the cluster profile under
// load (BUB_CLUSTER_TURNS over BUB_CLUSTER_SESSIONS per scenario, default
// 500 over 50) while NATS servers are killed, partitioned, restarted
// through lame duck and replaced with an empty volume. Each scenario prints
// one summary line and fails unless every turn has exactly one reply and
// one tape entry.
func TestComposeClusterFaults(t *testing.T) {
	c := newCluster(t, threeServers(t))
	c.up()
	base := "http://" + c.port("ingress", "8080")
	c.waitReady(base)
	var urls []string
	for _, svc := range natsServices {
		urls = append(urls, "nats://"+c.port(svc, "4222"))
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.UserInfo("admin", c.passwords["ADMIN"]),
		nats.MaxReconnects(-1), nats.ReconnectWait(200*time.Millisecond), nats.RetryOnFailedConnect(true),
		// a partitioned server's published port still accepts (docker's
		// proxy) and goes silent: notice within seconds, move on
		nats.PingInterval(2*time.Second), nats.MaxPingsOutstanding(2))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	f := &faults{c: c, js: js, web: base}
	f.healthy(t)

	t.Run("MicroServices", func(t *testing.T) { f.microServices(t, nc) })
	l := turnload.FromEnv(t, "BUB_CLUSTER", turnload.Load{Turns: 500, Sessions: 50})
	t.Run("KillLeaders", func(t *testing.T) {
		f.scenario(t, "kill", l, time.Minute, func(p *turnload.Pace) []string {
			var out []string
			for i, stream := range []string{"BUB_INBOUND", "BUB_EVENTS", "BUB_TAPES"} {
				f.waitFor(p, float64(i+1)/4)
				server := f.leader(t, stream)
				id := f.container(server)
				out = append(out, f.act(t, p, "docker kill "+server+" (leader of "+stream+")", func() {
					c.docker("kill", id)
					time.Sleep(4 * time.Second) // down for a few seconds
					c.docker("start", id)
				}))
			}
			return out
		})
	})
	t.Run("Partition", func(t *testing.T) {
		f.scenario(t, "partition", l, 40*time.Second, func(p *turnload.Pace) []string {
			f.waitFor(p, 0.3)
			server := f.leader(t, "BUB_INBOUND")
			svc, id := natsServices[server], f.container(server)
			network := c.project + "_default"
			return []string{f.act(t, p, "network disconnect "+server+" (leader of BUB_INBOUND) for 10s", func() {
				c.docker("network", "disconnect", network, id)
				time.Sleep(10 * time.Second) // the partition
				// back under its compose name and its name among the routes
				c.docker("network", "connect", "--alias", svc, "--alias", server, network, id)
			})}
		})
	})
	t.Run("RollingRestart", func(t *testing.T) {
		f.scenario(t, "rolling", l, 150*time.Second, func(p *turnload.Pace) []string {
			var out []string
			for i, server := range []string{"nats-1", "nats-2", "nats-3"} {
				f.waitFor(p, float64(i+1)/4)
				id := f.container(server)
				out = append(out, f.act(t, p, "lame duck + restart "+server, func() {
					started := c.docker("inspect", "-f", "{{.State.StartedAt}}", id)
					c.docker("kill", "-s", "SIGUSR2", id)
					f.restarted(t, id, started)
				}))
			}
			return out
		})
	})
	t.Run("VolumeLoss", func(t *testing.T) {
		f.scenario(t, "volume", l, 50*time.Second, func(p *turnload.Pace) []string {
			f.waitFor(p, 0.3)
			server := f.leader(t, "BUB_TAPES")
			svc := natsServices[server]
			volume := c.project + "_" + svc + "-data" // compose.yaml's volumes
			return []string{f.act(t, p, "replace "+server+" (leader of BUB_TAPES) with an empty volume", func() {
				c.compose("stop", "-t", "5", svc)
				c.compose("rm", "-f", svc)
				c.docker("volume", "rm", volume)
				c.compose("up", "-d", "--no-deps", svc)
			})}
		})
		f.caughtUp(t, "nats-1", "nats-2", "nats-3")
	})
	t.Logf("$ bub status\n%s", c.bub("status", "--nats", "nats://admin:"+c.passwords["ADMIN"]+"@"+strings.TrimPrefix(urls[0], "nats://")))
}

// faults acts on the compose cluster and measures it.
type faults struct {
	c   *cluster
	js  jetstream.JetStream
	web string
}

// scenario runs the load over span (the rate follows from the turns)
// while fault acts; fault's actions all run, also past the end of the
// load, and each returns the action with the time to the first answered
// new turn after it. It prints one summary line with them.
func (f *faults) scenario(t *testing.T, name string, l turnload.Load, span time.Duration, fault func(p *turnload.Pace) []string) {
	l.Rate = float64(l.Turns) / span.Seconds()
	var actions []string
	r := turnload.Run(t, "cluster", turnload.Target{Name: name, Web: f.web, JS: f.js}, l, func(_ context.Context, p *turnload.Pace) int {
		actions = fault(p)
		return len(actions)
	})
	line := fmt.Sprintf("cluster[%s] rate=%.1f/s recovery: %s", name, l.Rate, strings.Join(actions, "; "))
	fmt.Println(line)
	t.Log(line)
	if !r.Clean() {
		return
	}
	f.healthy(t)
}

// waitFor waits until the load is at fraction (not past its end).
func (f *faults) waitFor(p *turnload.Pace, fraction float64) {
	p.WaitFor(context.Background(), fraction)
}

// act marks and runs action, then probes until a new turn is answered
// and the cluster is healthy again; it returns "what: first answer after
// D, healthy after D", followed by what the cluster was last waited on
// for, if it was not healthy at once.
func (f *faults) act(t *testing.T, p *turnload.Pace, what string, action func()) string {
	t.Helper()
	p.Mark()
	start := time.Now()
	answered := make(chan time.Duration, 1)
	go func() { answered <- turnload.FirstAnswer(f.web, start) }()
	action()
	first := <-answered
	waited := f.healthy(t)
	line := fmt.Sprintf("%s: first answer after %s, healthy after %s", what, first.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond))
	if waited != "" {
		line += " (last waited on: " + waited + ")"
	}
	return line
}

// leader returns the server that leads stream.
func (f *faults) leader(t *testing.T, stream string) string {
	t.Helper()
	var leader string
	natstest.Eventually(t, time.Minute, func() (bool, string) {
		info, err := f.info(stream)
		if err != nil {
			return false, err.Error()
		}
		leader = info.Cluster.Leader
		return leader != "", stream + " has no leader"
	})
	return leader
}

// info reads stream's info; an error names the stream.
func (f *faults) info(stream string) (*jetstream.StreamInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := f.js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", stream, err)
	}
	info, err := st.Info(ctx)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: %w", stream, err)
	case info.Cluster == nil:
		return nil, fmt.Errorf("%s: no cluster info", stream)
	}
	return info, nil
}

// streams lists the streams of the deployment (retried while JetStream
// elects a meta leader).
func (f *faults) streams(t *testing.T) []string {
	t.Helper()
	var names []string
	natstest.Eventually(t, time.Minute, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		names = names[:0]
		lister := f.js.StreamNames(ctx)
		for n := range lister.Name() {
			names = append(names, n)
		}
		if err := lister.Err(); err != nil {
			return false, "stream names: " + err.Error()
		}
		return true, ""
	})
	return names
}

// healthy waits until every stream has three replicas, a leader and two
// current followers, and returns the last shortfall it waited on ("" when
// there was none).
func (f *faults) healthy(t *testing.T) (waited string) {
	t.Helper()
	streams := f.streams(t)
	if len(streams) < 9 {
		t.Fatalf("%d streams %v, want Bub's 9 (and its buckets)", len(streams), streams)
	}
	natstest.Eventually(t, 3*time.Minute, func() (ok bool, why string) {
		defer func() {
			if !ok {
				waited = why
			}
		}()
		for _, s := range streams {
			info, err := f.info(s)
			if err != nil {
				return false, err.Error()
			}
			if info.Config.Replicas != 3 {
				return false, fmt.Sprintf("%s has %d replicas", s, info.Config.Replicas)
			}
			if info.Cluster.Leader == "" || len(info.Cluster.Replicas) != 2 {
				return false, fmt.Sprintf("%s: leader %q, %d followers", s, info.Cluster.Leader, len(info.Cluster.Replicas))
			}
			for _, r := range info.Cluster.Replicas {
				if !r.Current || r.Offline {
					return false, fmt.Sprintf("%s: follower %s current %v offline %v lag %d", s, r.Name, r.Current, r.Offline, r.Lag)
				}
			}
		}
		return true, ""
	})
	return waited
}

// caughtUp checks that every stream comes to hold the same messages on
// each of servers: leader and current followers with no lag. The
// workers' turn registry keeps changing after the load (its keys expire),
// so a follower may be a message behind at any one instant: each stream
// gets a minute to show all of servers caught up at once.
func (f *faults) caughtUp(t *testing.T, servers ...string) {
	t.Helper()
	for _, s := range f.streams(t) {
		natstest.Eventually(t, time.Minute, func() (bool, string) {
			info, err := f.info(s)
			if err != nil {
				return false, err.Error()
			}
			have := []string{info.Cluster.Leader}
			var behind []string
			for _, r := range info.Cluster.Replicas {
				if r.Current && r.Lag == 0 {
					have = append(have, r.Name)
				} else {
					behind = append(behind, fmt.Sprintf("replica %s current %v lag %d", r.Name, r.Current, r.Lag))
				}
			}
			slices.Sort(have)
			return slices.Equal(have, servers), fmt.Sprintf("%s: caught-up replicas %v, want %v %v", s, have, servers, behind)
		})
	}
}

// container returns the container id of a server.
func (f *faults) container(server string) string {
	f.c.t.Helper()
	id := strings.TrimSpace(f.c.compose("ps", "-q", natsServices[server]))
	if id == "" {
		f.c.t.Fatalf("no container for %s", server)
	}
	return id
}

// restarted waits until container id, put in lame duck, has exited and
// run again (compose restarts it; started it if not), then until it
// answers clients.
func (f *faults) restarted(t *testing.T, id, started string) {
	t.Helper()
	natstest.Eventually(t, 2*time.Minute, func() (bool, string) {
		state := strings.Fields(f.c.docker("inspect", "-f", "{{.State.Running}} {{.State.StartedAt}}", id))
		if len(state) != 2 {
			return false, fmt.Sprint(state)
		}
		if state[0] == "false" {
			f.c.docker("start", id)
			return false, "exited; started"
		}
		return state[1] != strings.TrimSpace(started), "still in lame duck since " + started
	})
}

// microServices finds every service of the deployment by NATS micro
// discovery ($SRV.INFO): ingress, the three workers, the recorder and the
// policy interceptor.
func (f *faults) microServices(t *testing.T, nc *nats.Conn) {
	want := map[string]int{"bub-ingress": 1, "bub-worker": 3, "bub-recorder": 1, "policy": 1}
	var got map[string]int
	var listing []string
	natstest.Eventually(t, time.Minute, func() (bool, string) {
		got, listing = map[string]int{}, nil
		inbox := nc.NewRespInbox()
		sub, err := nc.SubscribeSync(inbox)
		if err != nil {
			return false, err.Error()
		}
		defer sub.Unsubscribe()
		subject, _ := micro.ControlSubject(micro.InfoVerb, "", "")
		if err := nc.PublishRequest(subject, inbox, nil); err != nil {
			return false, err.Error()
		}
		for {
			m, err := sub.NextMsg(2 * time.Second)
			if err != nil {
				break
			}
			var info micro.Info
			if json.Unmarshal(m.Data, &info) == nil {
				got[info.Name]++
				listing = append(listing, fmt.Sprintf("%s %s %s", info.Name, info.Version, info.ID))
			}
		}
		for name, n := range want {
			if got[name] != n {
				return false, fmt.Sprintf("micro services %v, want %v", got, want)
			}
		}
		return true, ""
	})
	slices.Sort(listing)
	t.Logf("NATS micro services ($SRV.INFO):\n  %s", strings.Join(listing, "\n  "))
}
