//go:build compose

package compose

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/proctest"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/subjects"
)

const (
	messages    = 100
	concurrency = 20
	killAfter   = 30 // replies before one worker is killed
	// turnDelay is the fake model's answer time: long enough that each
	// worker has turns in flight when one is killed.
	turnDelay = "1s"
)

// TestComposeCluster is the compose end-to-end test (see the package doc).
func TestComposeCluster(t *testing.T) {
	start := time.Now()
	c := newCluster(t, singleServer)
	c.up()
	base, natsURL := "http://"+c.port("ingress", "8080"), c.port("nats", "4222")

	c.waitReady(base)
	ready := time.Since(start)

	// An observer (subscribe-only NATS user) sees every reply and run.
	names := subjects.Default()
	obs, err := nats.Connect("nats://"+natsURL, nats.UserInfo("observer", c.passwords["OBSERVER"]))
	if err != nil {
		c.t.Fatal(err)
	}
	defer obs.Close()
	var mu sync.Mutex
	replier := map[string]string{} // inbound envelope id → worker instance of its first reply
	duplicates := 0
	redelivered := map[string]bool{}
	if _, err := obs.Subscribe(names.OutboundAll(), func(m *nats.Msg) {
		ev, err := events.FromMsg(m)
		if err != nil {
			return
		}
		var env envelope.Envelope
		if events.DecodeData(ev, &env) != nil {
			return
		}
		inst := strings.TrimPrefix(ev.Source(), events.Source("worker", ""))
		mu.Lock()
		defer mu.Unlock()
		if _, dup := replier[env.InReplyTo]; dup {
			duplicates++
			return
		}
		replier[env.InReplyTo] = inst
	}); err != nil {
		c.t.Fatal(err)
	}
	if _, err := obs.Subscribe(names.EventsOfType(events.SubjectName(events.TypeRunStarted)), func(m *nats.Msg) {
		ev, err := events.FromMsg(m)
		if err != nil {
			return
		}
		var d struct {
			Metadata struct {
				Delivery   float64 `json:"delivery"`
				EnvelopeID string  `json:"envelope_id"`
			} `json:"metadata"`
		}
		if json.Unmarshal(ev.Data(), &d) == nil && d.Metadata.Delivery > 1 {
			mu.Lock()
			redelivered[d.Metadata.EnvelopeID] = true
			mu.Unlock()
		}
	}); err != nil {
		c.t.Fatal(err)
	}
	if err := obs.Flush(); err != nil {
		c.t.Fatal(err)
	}

	// 100 messages, 20 at a time; after 30 replies the busiest worker is
	// killed (SIGKILL, no drain): its turns in flight come back after the
	// ack wait and the other workers answer them.
	workerIDs := c.workerContainers() // looked up now: the kill must be quick
	var answered atomic.Int64
	reached, loadDone := make(chan struct{}), make(chan struct{})
	var reachedOnce sync.Once
	killed := make(chan string, 1)
	go func() { // not the test goroutine: no t.Fatal here
		select {
		case <-reached:
		case <-loadDone:
			killed <- "none: the load ended first"
			return
		}
		mu.Lock()
		counts := map[string]int{}
		for _, inst := range replier {
			counts[inst]++
		}
		mu.Unlock()
		victim := ""
		for inst, n := range counts {
			if victim == "" || n > counts[victim] {
				victim = inst
			}
		}
		for _, id := range workerIDs {
			if host, _, _ := strings.Cut(victim, "-"); host != "" && strings.HasPrefix(id, host) {
				if out, err := c.exec(time.Minute, "docker", "kill", id); err != nil {
					killed <- fmt.Sprintf("none: docker kill %s: %v %s", id, err, out)
					return
				}
				killed <- victim + " (container " + id[:12] + ")"
				return
			}
		}
		killed <- "none: no container for " + victim
	}()

	loadStart := time.Now()
	client := &http.Client{Timeout: 3 * time.Minute}
	type result struct {
		status int
		id     string
		reply  string
		err    error
	}
	results := make([]result, messages)
	sem := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	for i := range messages {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			body, _ := json.Marshal(map[string]string{"content": fmt.Sprintf("message %03d", i), "session_id": fmt.Sprintf("e2e:%03d", i)})
			resp, err := client.Post(base+"/v1/messages?wait=150s", "application/json", bytes.NewReader(body))
			if err != nil {
				results[i].err = err
				return
			}
			defer resp.Body.Close()
			var r struct {
				ID        string              `json:"id"`
				Outbounds []envelope.Envelope `json:"outbounds"`
			}
			results[i].status = resp.StatusCode
			results[i].err = json.NewDecoder(resp.Body).Decode(&r)
			results[i].id = r.ID
			if len(r.Outbounds) > 0 {
				results[i].reply = r.Outbounds[0].Content
			}
			if answered.Add(1) == killAfter {
				reachedOnce.Do(func() { close(reached) })
			}
		})
	}
	wg.Wait()
	close(loadDone)
	loadTime := time.Since(loadStart)
	victim := <-killed
	if strings.HasPrefix(victim, "none") {
		c.t.Errorf("no worker was killed: %s", victim)
	}

	replies := 0
	for i, r := range results {
		want := fmt.Sprintf("message %03d", i)
		switch {
		case r.err != nil:
			c.t.Errorf("message %d: %v", i, r.err)
		case r.status != http.StatusOK || !strings.Contains(r.reply, want):
			c.t.Errorf("message %d: status %d, reply %q (want one containing %q)", i, r.status, r.reply, want)
		default:
			replies++
		}
	}
	natstest.Eventually(c.t, 30*time.Second, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(replier) >= messages, fmt.Sprintf("the observer saw replies to %d envelopes", len(replier))
	})
	mu.Lock()
	perWorker := map[string]int{}
	for _, r := range results {
		if inst, ok := replier[r.id]; ok {
			perWorker[inst]++
		}
	}
	nRedelivered, nDuplicates := len(redelivered), duplicates
	mu.Unlock()
	if len(perWorker) != 3 {
		c.t.Errorf("replies came from %d worker instances %v, want the 3 workers", len(perWorker), perWorker)
	}

	var st struct {
		Recorder    struct{ Lag uint64 }      `json:"recorder"`
		DeadLetters struct{ Messages uint64 } `json:"dead_letters"`
	}
	natstest.Eventually(c.t, 60*time.Second, func() (bool, string) {
		out := c.bub("status", "--json", "--nats", "nats://admin:"+c.passwords["ADMIN"]+"@"+natsURL)
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			return false, err.Error()
		}
		return st.Recorder.Lag == 0, fmt.Sprintf("recorder lag %d", st.Recorder.Lag)
	})
	status := c.bub("status", "--nats", "nats://admin:"+c.passwords["ADMIN"]+"@"+natsURL)
	if st.DeadLetters.Messages != 0 {
		c.t.Errorf("%d dead letters", st.DeadLetters.Messages)
	}
	tail := c.tail(base, "nats://observer:"+c.passwords["OBSERVER"]+"@"+natsURL)
	traceSummary := c.checkTrace("e2e:tail")
	violations := strings.Count(c.compose("logs", "--no-color", "nats"), "Permissions Violation")
	if violations > 0 {
		c.t.Errorf("the NATS server logged %d permission violations", violations)
	}
	restarts := c.docker(append([]string{"inspect", "-f", "{{.Name}} restarts={{.RestartCount}} {{.State.Status}}"}, c.workerContainers()...)...)

	var b strings.Builder
	fmt.Fprintf(&b, "compose e2e summary (%s, NATS image %s)\n", c.composeCmd(), c.natsImage)
	fmt.Fprintf(&b, "  cluster ready in %s; %d messages, %d at a time, fake model %s per answer\n", ready.Round(time.Second), messages, concurrency, turnDelay)
	fmt.Fprintf(&b, "  replies: %d/%d over HTTP in %s\n", replies, messages, loadTime.Round(100*time.Millisecond))
	fmt.Fprintf(&b, "  per worker (first reply per envelope, from the outbound CloudEvent source):\n")
	for _, inst := range slices.Sorted(maps.Keys(perWorker)) {
		fmt.Fprintf(&b, "    %-16s %3d\n", inst, perWorker[inst])
	}
	fmt.Fprintf(&b, "  killed after %d replies: %s\n", killAfter, victim)
	fmt.Fprintf(&b, "  turns redelivered after the kill: %d; duplicate replies seen by the observer: %d\n", nRedelivered, nDuplicates)
	fmt.Fprintf(&b, "  worker containers afterwards:\n    %s\n", strings.ReplaceAll(strings.TrimSpace(restarts), "\n", "\n    "))
	fmt.Fprintf(&b, "  dead letters: %d; recorder lag: %d; NATS permission violations: %d\n", st.DeadLetters.Messages, st.Recorder.Lag, violations)
	fmt.Fprintf(&b, "  one trace across the containers (console span exporter, from their stdout):\n%s", traceSummary)
	fmt.Fprintf(&b, "\n$ bub status\n%s\n$ bub events tail --session e2e:tail\n%s", status, tail)
	c.t.Log("\n" + b.String())
}

// cluster is one compose project of deploy/compose.yaml plus a fake model.
type cluster struct {
	t         testing.TB // a *failureRecap of the test
	cmd       []string   // docker compose, or docker-compose
	files     []string
	project   string
	env       []string
	passwords map[string]string
	natsImage string
	bubBin    string
	deploy    string   // the deploy directory
	global    []string // compose options before the command
}

// clusterOpts shape a [cluster].
type clusterOpts struct {
	// project prefixes the compose project's name (the pid follows).
	project string
	// turnDelay is the fake model's answer time.
	turnDelay string
	// global are compose options before the command (--env-file, --profile).
	global []string
	// env is added to compose's environment.
	env []string
}

// singleServer is deploy/compose.yaml as it is: one NATS server.
var singleServer = clusterOpts{project: "bube2e", turnDelay: turnDelay}

func newCluster(t *testing.T, o clusterOpts) *cluster {
	t.Helper()
	deploy, err := filepath.Abs(filepath.Join("..", "..", "deploy"))
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(deploy, "compose.yaml")
	c := &cluster{t: &failureRecap{TB: t}, project: fmt.Sprintf("%s%d", o.project, os.Getpid()), passwords: map[string]string{}, deploy: deploy}
	for _, g := range o.global {
		c.global = append(c.global, strings.ReplaceAll(g, "$DEPLOY", deploy))
	}
	switch {
	case exec.Command("docker", "compose", "version").Run() == nil:
		c.cmd = []string{"docker", "compose"}
	case exec.Command("docker-compose", "version").Run() == nil:
		c.cmd = []string{"docker-compose"}
	default:
		t.Fatal("neither `docker compose` nor `docker-compose` works")
	}
	bubImage := envOr("BUB_IMAGE", "bub/bub:local")
	c.natsImage = envOr("NATS_IMAGE", "bub/nats:local")
	for _, img := range []string{bubImage, c.natsImage} {
		if err := exec.Command("docker", "image", "inspect", img).Run(); err != nil {
			t.Fatalf("image %s is missing: run make images nats-image (or make e2e-compose)", img)
		}
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "fakellm.json")
	writeFile(t, script, fmt.Sprintf(`{"steps": [{"echo": true, "repeat": true, "delay": %q}]}`, o.turnDelay))
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	override := filepath.Join(dir, "compose.e2e.yaml")
	writeFile(t, override, fmt.Sprintf(`services:
  fakellm:
    image: %s
    entrypoint: ["/bub", "fake-llm", "--addr", "0.0.0.0:9000", "--script", "/script.json"]
    volumes: ["%s:/script.json:ro"]
`, bubImage, script))
	c.files = []string{base, override}
	c.env = append(os.Environ(),
		"BUB_IMAGE="+bubImage, "NATS_IMAGE="+c.natsImage,
		"BUB_HTTP_PUBLISH=127.0.0.1:0", "BUB_NATS_PUBLISH=127.0.0.1:0",
		"BUB_ACK_WAIT=10s",
		"BUB_MODEL=openai:fake", "BUB_API_BASE=http://fakellm:9000/v1", "BUB_API_KEY=e2e",
		// every service writes its spans to stdout, as JSON
		"OTEL_TRACES_EXPORTER=console",
	)
	c.env = append(c.env, o.env...)
	for _, role := range []string{"INGRESS", "WORKER", "RECORDER", "INTERCEPTOR", "OBSERVER", "ADMIN"} {
		c.passwords[role] = randomHex(t)
		c.env = append(c.env, "BUB_NATS_"+role+"_PASSWORD="+c.passwords[role])
	}
	c.bubBin = filepath.Join(envOr("BUB_BIN_DIR", filepath.Join("..", "..", "bin")), "bub")
	if _, err := os.Stat(c.bubBin); err != nil {
		t.Fatalf("no bub binary at %s (set BUB_BIN_DIR): %v", c.bubBin, err)
	}
	return c
}

func (c *cluster) composeCmd() string { return strings.Join(c.cmd, " ") }

// up starts the cluster; the test's cleanup takes it down with its volumes.
func (c *cluster) up() {
	c.t.Cleanup(func() {
		if c.t.Failed() {
			c.t.Logf("cluster logs (tail):\n%s", c.composeQuiet("logs", "--no-color", "--tail", "40"))
			c.t.(*failureRecap).recap()
		}
		c.composeQuiet("down", "-v", "--remove-orphans", "--timeout", "5")
	})
	c.compose("up", "-d")
}

func (c *cluster) args(args ...string) []string {
	out := append([]string(nil), c.cmd[1:]...)
	out = append(out, c.global...)
	out = append(out, "-p", c.project)
	for _, f := range c.files {
		out = append(out, "-f", f)
	}
	return append(out, args...)
}

// waitReady waits until ingress is ready and the three workers report
// healthy.
func (c *cluster) waitReady(base string) {
	c.t.Helper()
	natstest.Eventually(c.t, 3*time.Minute, func() (bool, string) {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false, "ingress: " + err.Error()
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, "ingress: " + resp.Status
		}
		ids := c.workerContainers()
		if len(ids) != 3 {
			return false, fmt.Sprintf("%d worker containers", len(ids))
		}
		health := c.docker(append([]string{"inspect", "-f", "{{.State.Health.Status}}"}, ids...)...)
		healthy := strings.Count(health, "healthy") - strings.Count(health, "unhealthy")
		return len(ids) == 3 && healthy == 3, fmt.Sprintf("%d worker containers, health %q", len(ids), strings.Fields(health))
	})
}

// compose runs a compose command and fails the test when it fails.
func (c *cluster) compose(args ...string) string {
	c.t.Helper()
	out, err := c.exec(3*time.Minute, c.cmd[0], c.args(args...)...)
	if err != nil {
		c.t.Fatalf("%s %s: %v\n%s", c.composeCmd(), strings.Join(args, " "), err, out)
	}
	return out
}

// composeQuiet runs a compose command whose failure is only logged.
func (c *cluster) composeQuiet(args ...string) string {
	out, err := c.exec(3*time.Minute, c.cmd[0], c.args(args...)...)
	if err != nil {
		c.t.Logf("%s %s: %v\n%s", c.composeCmd(), strings.Join(args, " "), err, out)
	}
	return out
}

func (c *cluster) docker(args ...string) string {
	c.t.Helper()
	out, err := c.exec(time.Minute, "docker", args...)
	if err != nil {
		c.t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (c *cluster) bub(args ...string) string {
	c.t.Helper()
	out, err := c.exec(time.Minute, c.bubBin, args...)
	if err != nil {
		c.t.Fatalf("bub %s: %v\n%s", args[0], err, out)
	}
	return out
}

func (c *cluster) exec(timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = c.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// port returns the host address a service's container port is published
// on.
func (c *cluster) port(service, port string) string {
	c.t.Helper()
	addr := strings.TrimSpace(c.compose("port", service, port))
	if addr == "" || strings.HasSuffix(addr, ":0") {
		c.t.Fatalf("%s:%s is not published (%q)", service, port, addr)
	}
	return strings.Replace(addr, "0.0.0.0:", "127.0.0.1:", 1)
}

func (c *cluster) workerContainers() []string {
	c.t.Helper()
	return strings.Fields(c.compose("ps", "-q", "worker"))
}

// tail runs `bub events tail` for one session while a message goes
// through it, and returns what it printed (up to the run's end).
func (c *cluster) tail(base, natsURL string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bubBin, "events", "tail", "--nats", natsURL, "--session", "e2e:tail")
	cmd.Env = c.env
	var out proctest.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	// The tail cannot say when it subscribed: send messages until one run
	// shows up in full (each try waits for its reply).
	send := func() {
		resp, err := http.Post(base+"/v1/messages?wait=30s", "application/json", strings.NewReader(`{"content": "watch me", "session_id": "e2e:tail"}`))
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	natstest.Eventually(c.t, 45*time.Second, func() (bool, string) {
		send()
		return strings.Contains(out.String(), "run.finished"), "no run.finished in the tail yet:\n" + out.String()
	})
	// Subscribed now: the next run shows up whole.
	seen := len(out.String())
	send()
	natstest.Eventually(c.t, 30*time.Second, func() (bool, string) {
		return strings.Contains(out.String()[seen:], "run.finished"), "the second run did not finish in the tail"
	})
	s := out.String()[seen:]
	if i := strings.Index(s, "run.finished"); i >= 0 {
		if j := strings.IndexByte(s[i:], '\n'); j >= 0 {
			s = s[:i+j+1]
		}
	}
	return s
}

// span is the part of a span the console exporter prints that the test
// reads.
type span struct {
	Name        string
	SpanContext struct{ TraceID, SpanID string }
	Parent      struct{ TraceID, SpanID string }
	Attributes  []keyValue
	Resource    []keyValue
}

type keyValue struct {
	Key   string
	Value struct{ Value any }
}

func attrOf(kvs []keyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key == key {
			return fmt.Sprint(kv.Value.Value)
		}
	}
	return ""
}

// spans reads the spans the ingress, worker and recorder containers
// printed on stdout (their logs go to stderr).
func (c *cluster) spans() []span {
	c.t.Helper()
	var out []span
	for _, svc := range []string{"ingress", "worker", "recorder"} {
		for _, id := range strings.Fields(c.compose("ps", "-q", svc)) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			cmd := exec.CommandContext(ctx, "docker", "logs", id)
			var stdout bytes.Buffer
			cmd.Stdout = &stdout
			err := cmd.Run()
			cancel()
			if err != nil {
				c.t.Fatalf("docker logs %s: %v", id, err)
			}
			dec := json.NewDecoder(&stdout)
			for dec.More() {
				var s span
				if err := dec.Decode(&s); err != nil {
					break
				}
				if s.SpanContext.SpanID != "" {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

// checkTrace finds the trace of a turn of session in the spans the
// containers exported and checks that it crosses the three services with
// the parent/child chain of a turn; it returns a rendering of the trace.
func (c *cluster) checkTrace(session string) string {
	c.t.Helper()
	want := map[string]string{ // span → service that must have exported it
		"POST /v1/messages": "ingress", "send ": "ingress", "process ": "worker",
		"invoke_agent": "worker", "chat fake": "worker", "commit tape": "recorder", "receive ": "ingress",
	}
	var trace []span
	natstest.Eventually(c.t, 30*time.Second, func() (bool, string) {
		all := c.spans()
		for _, s := range all {
			if s.Name == "invoke_agent" && attrOf(s.Attributes, "gen_ai.conversation.id") == session {
				trace = trace[:0]
				for _, o := range all {
					if o.SpanContext.TraceID == s.SpanContext.TraceID {
						trace = append(trace, o)
					}
				}
				if len(trace) >= len(want) {
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("no complete trace of %s among %d exported spans (have %d of it)", session, len(all), len(trace))
	})
	byID := map[string]span{}
	for _, s := range trace {
		byID[s.SpanContext.SpanID] = s
	}
	var b strings.Builder
	services := map[string]bool{}
	for prefix, service := range want {
		found := false
		for _, s := range trace {
			if strings.HasPrefix(s.Name, prefix) && attrOf(s.Resource, "service.name") == service {
				found = true
			}
		}
		if !found {
			c.t.Errorf("trace %s has no %q span exported by %s", trace[0].SpanContext.TraceID, prefix, service)
		}
		services[service] = true
	}
	chain := map[string]string{"send ": "POST /v1/messages", "process ": "send ", "invoke_agent": "process ", "chat fake": "invoke_agent", "commit tape": "invoke_agent", "receive ": "process "}
	for _, s := range trace {
		for child, parent := range chain {
			if strings.HasPrefix(s.Name, child) && !strings.HasPrefix(byID[s.Parent.SpanID].Name, parent) {
				c.t.Errorf("span %q: parent %q, want %q", s.Name, byID[s.Parent.SpanID].Name, parent)
			}
		}
	}
	// Render the tree, children in name order.
	children := map[string][]span{}
	for _, s := range trace {
		children[s.Parent.SpanID] = append(children[s.Parent.SpanID], s)
	}
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		kids := children[parent]
		slices.SortFunc(kids, func(a, b span) int { return strings.Compare(a.Name, b.Name) })
		for _, s := range kids {
			fmt.Fprintf(&b, "      %-44s %s/%s\n", strings.Repeat("  ", depth)+s.Name, attrOf(s.Resource, "service.name"), attrOf(s.Resource, "host.name"))
			walk(s.SpanContext.SpanID, depth+1)
		}
	}
	fmt.Fprintf(&b, "    trace %s (span, service/container):\n", trace[0].SpanContext.TraceID)
	for _, s := range trace {
		if _, ok := byID[s.Parent.SpanID]; !ok { // roots
			fmt.Fprintf(&b, "      %-44s %s/%s\n", s.Name, attrOf(s.Resource, "service.name"), attrOf(s.Resource, "host.name"))
			walk(s.SpanContext.SpanID, 1)
		}
	}
	return b.String()
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// failureRecap is the test's testing.TB that repeats every failure message
// after the cluster logs a failed test prints, so that the end of the
// output (all a CI log excerpt may show) says what failed.
type failureRecap struct {
	testing.TB
	mu       sync.Mutex
	failures []string
}

func (f *failureRecap) note(msg string) {
	f.mu.Lock()
	f.failures = append(f.failures, msg)
	f.mu.Unlock()
}

func (f *failureRecap) Errorf(format string, args ...any) {
	f.Helper()
	f.note(fmt.Sprintf(format, args...))
	f.TB.Errorf(format, args...)
}

func (f *failureRecap) Fatalf(format string, args ...any) {
	f.Helper()
	f.note(fmt.Sprintf(format, args...))
	f.TB.Fatalf(format, args...)
}

func (f *failureRecap) Fatal(args ...any) {
	f.Helper()
	f.note(fmt.Sprint(args...))
	f.TB.Fatal(args...)
}

func (f *failureRecap) recap() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.TB.Logf("the failures above the cluster logs, again:\n  %s", strings.Join(f.failures, "\n  "))
}
