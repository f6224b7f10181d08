package bubcmd

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/internal/stack"
	"github.com/bubbus/bub/internal/telemetry"
	"github.com/bubbus/bub/pkg/hooks/remote"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tools/mcptools"
)

// bindWorker registers the worker flags; models come from BUB_MODEL and
// friends (see llm.ConfigFromEnv), remote interceptors from
// BUB_INTERCEPTORS (see loadModels).
func bindWorker(fs *pflag.FlagSet, o *stack.WorkerOptions, env *Env) {
	getenv := env.Getenv
	o.Plugins = env.Plugins
	o.SkillConfig = env.Lookup
	o.Channels = stack.BuiltinChannels(getenv, env.logger())
	wd, _ := os.Getwd()
	fs.StringVar(&o.Workspace, "workspace", cli.EnvOr(getenv, "BUB_WORKSPACE", wd), "workspace directory the tools work in (env BUB_WORKSPACE)")
	fs.IntVar(&o.Worker.Concurrency, "concurrency", envInt(getenv, "BUB_WORKER_CONCURRENCY", 256), "turns in flight per worker (env BUB_WORKER_CONCURRENCY)")
	fs.IntVar(&o.Agent.MaxSteps, "max-steps", envInt(getenv, "BUB_MAX_STEPS", 0), "maximum agent steps per run, 0 = unlimited (env BUB_MAX_STEPS)")
	o.CaptureContent = telemetry.CaptureContent(getenv)
	fs.StringVar(&o.Admission, "admission", getenv("BUB_ADMISSION"), "admission policy for busy sessions: process, drop, follow_up or steer, optionally per channel (cli:steer,http:follow_up) (env BUB_ADMISSION)")
	fs.DurationVar(&o.Worker.ShutdownGrace, "shutdown-grace", cli.DurationFromEnv(getenv, "BUB_SHUTDOWN_GRACE", 30*time.Second), "on SIGTERM, how long running turns may finish before they are handed back (env BUB_SHUTDOWN_GRACE)")
}

func envInt(getenv cli.Getenv, key string, def int) int {
	if v := getenv(key); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return def
}

// loadModels reads the model configuration, the remote interceptors
// (BUB_INTERCEPTORS, see remote.ConfigsFromEnv) and the MCP servers
// (BUB_MCP_SERVERS, see mcptools.ServersFromEnv) from the environment.
func loadModels(getenv cli.Getenv, o *stack.WorkerOptions) error {
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

// NewWorker returns the worker service command.
func NewWorker(env *Env) *cobra.Command {
	getenv := env.Getenv
	var o stack.WorkerOptions
	return newServiceCommand(env, service{
		name:    "worker",
		short:   "Run turns: consume inbound envelopes, call models and tools, publish events and replies",
		bind:    func(fs *pflag.FlagSet) { bindWorker(fs, &o, env) },
		prepare: func(context.Context) error { return loadModels(getenv, &o) },
		config: func() []any {
			return []any{"models", o.Models, "workspace", o.Workspace, "interceptors", o.Interceptors, "mcp", fmt.Sprint(o.MCP)}
		},
		run: func(ctx context.Context, conn *stack.Conn, instance string, log *slog.Logger) error {
			o.Instance = instance
			return stack.RunWorker(ctx, conn, o, log)
		},
	})
}

// NewRecorder returns the recorder service command.
func NewRecorder(env *Env) *cobra.Command {
	o := stack.RecorderOptions{Plugins: env.Plugins}
	return newServiceCommand(env, service{
		name:   "recorder",
		short:  "Build tapes from lifecycle events (the only tape writer)",
		config: func() []any { return nil },
		run: func(ctx context.Context, conn *stack.Conn, instance string, log *slog.Logger) error {
			o.Instance = instance
			return stack.RunRecorder(ctx, conn, o, log)
		},
	})
}
