package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/bubbus/bub/pkg/config"
)

// Main runs the command built by newCmd with os.Args, cancelling its context
// on SIGINT or SIGTERM, and exits non-zero on error. The command reads the
// environment through the configuration file of the home the arguments
// name (config.LoadFor), so flags beat BUB_* variables, which beat
// <home>/config.yaml, which beats the defaults. It is the whole body of
// every cmd/*/main.go.
func Main(newCmd func(getenv Getenv) *cobra.Command) {
	getenv, _, err := config.LoadFor(os.Args[1:], os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	stopProfile := startCPUProfile(getenv(EnvCPUProfile))
	cmd := newCmd(getenv)
	cmd.SetArgs(os.Args[1:])
	err = cmd.ExecuteContext(ctx)
	stop()
	stopProfile()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// EnvCPUProfile names the environment variable that makes a command write
// a CPU profile: its value is a path prefix, completed with the command
// name and the process id (…/worker-1234.pprof). Set for `bub bench`, it
// profiles every process of the run (children inherit it).
const EnvCPUProfile = "BUB_CPUPROFILE"

// startCPUProfile starts a CPU profile at prefix-<command>-<pid>.pprof
// when prefix is set and returns what stops it.
func startCPUProfile(prefix string) (stop func()) {
	if prefix == "" {
		return func() {}
	}
	path := fmt.Sprintf("%s%s-%d.pprof", prefix, filepath.Base(os.Args[0]), os.Getpid())
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "warning: no CPU profile:", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}
}
