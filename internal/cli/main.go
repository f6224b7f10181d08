package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// Main runs the command built by newCmd with os.Args, cancelling its context
// on SIGINT or SIGTERM, and exits non-zero on error. It is the whole body of
// every cmd/*/main.go.
func Main(newCmd func(getenv Getenv) *cobra.Command) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	cmd := newCmd(os.Getenv)
	cmd.SetArgs(os.Args[1:])
	err := cmd.ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
