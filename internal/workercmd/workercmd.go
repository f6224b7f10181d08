package workercmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/bubbus/bub/internal/channelset"
	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/internal/service"
	"github.com/bubbus/bub/internal/telemetry"
	"github.com/bubbus/bub/pkg/hooks/remote"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tools/mcptools"
)

// Bind registers the worker flags (shared by the worker and the bub
// commands that run turns: up, run, chat, hooks) and fills in what comes
// from env; models come from BUB_MODEL and friends (see llm.ConfigFromEnv),
// remote interceptors from BUB_INTERCEPTORS (see [Load]).
func Bind(fs *pflag.FlagSet, o *Options, env service.Env) {
	getenv := env.Getenv
	// envInt is the number in key, def when it is unset; one that is not a
	// whole number of 0 or more is recorded for Load to report.
	envInt := func(key string, def int) int {
		v := getenv(key)
		if v == "" {
			return def
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			o.envErr = errors.Join(o.envErr, fmt.Errorf("%s=%q: want a whole number, 0 or more", key, v))
			return def
		}
		return n
	}
	o.Plugins = env.Plugins
	o.SkillConfig = env.Lookup
	o.Channels = channelset.Builtin(getenv, env.Logger())
	wd, _ := os.Getwd()
	fs.StringVar(&o.Workspace, "workspace", cli.EnvOr(getenv, "BUB_WORKSPACE", wd), "workspace directory the tools work in (env BUB_WORKSPACE)")
	fs.IntVar(&o.Worker.Concurrency, "concurrency", envInt("BUB_WORKER_CONCURRENCY", 256), "turns in flight per worker (env BUB_WORKER_CONCURRENCY)")
	fs.IntVar(&o.TapeCacheMiB, "tape-cache", envInt(envTapeCache, defaultTapeCacheMiB), "MiB of tape messages kept decoded for the sessions' next turns, 0 = none (env "+envTapeCache+")")
	fs.IntVar(&o.Agent.MaxSteps, "max-steps", envInt("BUB_MAX_STEPS", 0), "maximum agent steps per run, 0 = unlimited (env BUB_MAX_STEPS)")
	o.CaptureContent = telemetry.CaptureContent(getenv)
	fs.StringVar(&o.Admission, "admission", getenv("BUB_ADMISSION"), "admission policy for busy sessions: process, drop, follow_up or steer, optionally per channel (cli:steer,http:follow_up) (env BUB_ADMISSION)")
	fs.DurationVar(&o.Worker.ShutdownGrace, "shutdown-grace", cli.DurationFromEnv(getenv, "BUB_SHUTDOWN_GRACE", 30*time.Second), "on SIGTERM, how long running turns may finish before they are handed back (env BUB_SHUTDOWN_GRACE)")
}

// The tape cache: a turn reads its session's context, every entry since
// the last anchor; the entries a worker read last are kept decoded (up to
// this many MiB of their messages) so that a session's next turn reads
// only what came since. Sessions whose contexts do not fit are read whole
// each turn.
const (
	envTapeCache        = "BUB_TAPE_CACHE"
	defaultTapeCacheMiB = 8
)

// Load reports the worker's numbers from the environment that Bind could
// not take (a value that is not one is an error, not the default) and
// checks the tape cache's size, and reads the model configuration, the remote interceptors
// (BUB_INTERCEPTORS, see remote.ConfigsFromEnv) and the MCP servers
// (BUB_MCP_SERVERS, see mcptools.ServersFromEnv) from the environment.
func Load(getenv cli.Getenv, o *Options) error {
	if o.envErr != nil {
		return o.envErr
	}
	if o.TapeCacheMiB < 0 {
		return fmt.Errorf("tape cache of %d MiB (--tape-cache, %s): want 0 (none) or more", o.TapeCacheMiB, envTapeCache)
	}
	cfg, err := llm.ConfigFromEnv(getenv)
	if err != nil {
		return fmt.Errorf("model configuration: %w", err)
	}
	o.Models = cfg
	if o.Interceptors, err = remote.ConfigsFromEnv(getenv); err != nil {
		return fmt.Errorf("interceptor configuration: %w", err)
	}
	if o.MCP, err = mcptools.ServersFromEnv(getenv); err != nil {
		return fmt.Errorf("MCP configuration: %w", err)
	}
	return nil
}

// Service returns the worker service.
func Service(env service.Env) service.Spec {
	var o Options
	return service.Spec{
		Name:    "worker",
		Short:   "Run turns: consume inbound envelopes, call models and tools, publish events and replies",
		Bind:    func(fs *pflag.FlagSet) { Bind(fs, &o, env) },
		Prepare: func(context.Context) error { return Load(env.Getenv, &o) },
		Config: func() []any {
			return []any{"models", o.Models, "workspace", o.Workspace, "interceptors", o.Interceptors, "mcp", fmt.Sprint(o.MCP)}
		},
		Run: func(ctx context.Context, conn *service.Conn, instance string, log *slog.Logger) error {
			o.Instance = instance
			return Run(ctx, conn, o, log)
		},
	}
}
