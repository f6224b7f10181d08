package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"syscall"
)

// Main runs run with the process arguments (without the program name),
// cancelling its context on SIGINT or SIGTERM, and exits non-zero on
// error. It is the whole body of every main: cmd/* and pkg/app.Main.
func Main(run func(ctx context.Context, args []string) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	stopProfile := startCPUProfile(os.Getenv(EnvCPUProfile))
	err := run(ctx, os.Args[1:])
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
