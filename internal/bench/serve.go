package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/bubbus/bub/internal/worker"
	"github.com/bubbus/bub/internal/workercmd"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/hooks/interceptor"
	"github.com/bubbus/bub/pkg/hooks/remote"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/subjects"
	"github.com/bubbus/bub/pkg/tools"
)

// The roles a harness child process plays (`bub bench --serve ROLE`).
const (
	// RoleInterceptor serves the benchmark interceptor service (a no-op
	// plugin on before_llm_call, after_llm_call and before_tool_call) and,
	// in the same process, the raw responders of the limits.
	RoleInterceptor = "interceptor"
	// RoleSimWorker and RoleSimRecorder are the simulation's worker and
	// recorder.
	RoleSimWorker   = "sim-worker"
	RoleSimRecorder = "sim-recorder"
	// RoleSSERelay is P8's limit: a bare SSE relay of a model's stream.
	RoleSSERelay = "sse-relay"
)

// Roles lists every role.
var Roles = []string{RoleInterceptor, RoleSimWorker, RoleSimRecorder, RoleSSERelay, RoleNATSNode}

// readyLine is what a role prints (on stderr) once it serves.
const readyLine = "bench.ready"

// hookService is the benchmark interceptor's service name.
const hookService = "benchhook"

// turnHooks are the two interceptor hops of every benchmark turn.
var turnHooks = []hooks.Hook{hooks.HookBeforeLLMCall, hooks.HookAfterLLMCall}

// ServeConfig configures [Serve].
type ServeConfig struct {
	// Role is one of [Roles].
	Role string
	// URL is the NATS server.
	URL string
	// Params is the JSON turn pattern of the simulation roles.
	Params string
	// Upstream is the model API base URL of the SSE relay.
	Upstream string
}

// Serve runs one role of a load test until ctx ends: the hidden
// `bub bench --serve ROLE` mode the harness starts as separate processes.
// It writes "bench.ready" (or the service's own "consuming" log line) to w
// once it serves.
func Serve(ctx context.Context, c ServeConfig, w io.Writer) error {
	log := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
	switch c.Role {
	case RoleSSERelay:
		return serveSSERelay(ctx, c.Upstream, func(addr string) { log.Info(readyLine, "role", c.Role, "addr", addr) })
	case RoleNATSNode:
		var p nodeParams
		if err := json.Unmarshal([]byte(c.Params), &p); err != nil {
			return fmt.Errorf("nats-node params: %w", err)
		}
		return serveNATSNode(ctx, p, func(url string) { log.Info(readyLine, "role", c.Role, "url", url) })
	}
	nc, err := nats.Connect(c.URL, nats.Name("bench-"+c.Role), nats.MaxReconnects(-1))
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", c.URL, err)
	}
	defer nc.Close()
	var p simParams
	if c.Params != "" {
		if err := json.Unmarshal([]byte(c.Params), &p); err != nil {
			return fmt.Errorf("sim params: %w", err)
		}
	}
	ready := func() { log.Info(readyLine, "role", c.Role) }
	switch c.Role {
	case RoleInterceptor:
		return serveInterceptor(ctx, nc, ready)
	case RoleSimWorker:
		ready()
		return runSimWorker(ctx, nc, p)
	case RoleSimRecorder:
		ready()
		return runSimRecorder(ctx, nc, p)
	}
	return fmt.Errorf("unknown role %q (want one of %v)", c.Role, Roles)
}

// noopInterceptor has no opinion on anything.
type noopInterceptor struct{}

func (noopInterceptor) Name() string { return hookService }

func (noopInterceptor) BeforeLLMCall(context.Context, hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
	return nil, nil, nil
}

func (noopInterceptor) AfterLLMCall(context.Context, hooks.AfterLLMCallInput) error { return nil }

func (noopInterceptor) BeforeToolCall(context.Context, hooks.BeforeToolCallInput) (*tools.Decision, error) {
	return nil, nil
}

var (
	_ hooks.LLMCallInterceptor  = noopInterceptor{}
	_ hooks.LLMCallObserver     = noopInterceptor{}
	_ hooks.ToolCallInterceptor = noopInterceptor{}
)

// noOpinion is the interceptor's reply body for all three hooks, which the
// raw responders send too.
func noOpinion() []byte {
	b, _ := json.Marshal(remote.Reply{})
	return b
}

// serveInterceptor serves the interceptor service and a raw responder per
// hook (same queue-group subscription model, same reply bytes).
func serveInterceptor(ctx context.Context, nc *nats.Conn, ready func()) error {
	svc, err := interceptor.Serve(ctx, nc, subjects.Default(), noopInterceptor{})
	if err != nil {
		return err
	}
	reply := noOpinion()
	names := simNames()
	for _, h := range []hooks.Hook{hooks.HookBeforeLLMCall, hooks.HookAfterLLMCall, hooks.HookBeforeToolCall} {
		if _, err := nc.QueueSubscribe(names.Hook(rawService, string(h)), rawService, func(m *nats.Msg) {
			_ = m.Respond(reply)
		}); err != nil {
			return errors.Join(err, svc.Stop(context.Background()))
		}
	}
	if err := nc.Flush(); err != nil {
		return errors.Join(err, svc.Stop(context.Background()))
	}
	ready()
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return svc.Stop(sctx)
}

// hookConfig is the remote interceptor configuration of the benchmark
// workers: the two LLM hooks, fail-closed (every call must reach the
// service).
func hookConfig() remote.Config {
	return remote.Config{Service: hookService, Hooks: turnHooks, Failure: remote.FailClosed, Timeout: 5 * time.Second}
}

// interceptorEnv configures hookConfig for bin/worker.
func interceptorEnv() []string {
	c := hookConfig()
	hs := make([]string, len(c.Hooks))
	for i, h := range c.Hooks {
		hs[i] = string(h)
	}
	return []string{
		remote.EnvInterceptors + "=" + c.Service,
		remote.EnvHooks(c.Service) + "=" + strings.Join(hs, ","),
		remote.EnvFailure(c.Service) + "=" + string(c.Failure),
		remote.EnvTimeout(c.Service) + "=" + c.Timeout.String(),
	}
}

// workerOptions are the all-in-one layout's worker: the echo model and the
// benchmark interceptor.
func workerOptions(concurrency int, dir, instance string) workercmd.Options {
	return workercmd.Options{
		Worker:       worker.Config{Concurrency: concurrency},
		Instance:     instance,
		Models:       llm.Config{Model: "echo:echo"},
		Workspace:    dir,
		Interceptors: []remote.Config{hookConfig()},
	}
}
