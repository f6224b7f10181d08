package bubcmd

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/bubbus/bub/pkg/tools"
	"github.com/bubbus/bub/pkg/tools/mcptools"
)

func newMCP(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Inspect the configured MCP servers",
		Args:  cobra.NoArgs,
	}
	var asJSON bool
	var timeout time.Duration
	list := &cobra.Command{
		Use:   "list",
		Short: "Connect to every configured MCP server and list its state and tools",
		Long: `Connects to every MCP server of the configuration (mcp.servers in
<home>/config.yaml, or BUB_MCP_SERVERS) as a worker does, and prints each
server's transport, target and state (with the reason when it is down),
then its tools (mcp.<server>_<tool>, which the model calls
mcp_<server>_<tool>) with their
effect class. Env and header values never show.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			servers, err := mcptools.ServersFromEnv(env.Getenv)
			if err != nil {
				return err
			}
			status, err := mcpStatus(cmd.Context(), servers, timeout)
			if err != nil {
				return err
			}
			return printReport(cmd.OutOrStdout(), asJSON, status, printMCP)
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print the servers as JSON")
	list.Flags().DurationVar(&timeout, "timeout", 15*time.Second, "how long to wait for each server's connection")
	cmd.AddCommand(list)
	return cmd
}

// mcpStatus starts servers, registers their tools in a registry of their
// own (so the tools it refuses show why) and returns their status.
func mcpStatus(ctx context.Context, servers []mcptools.Server, timeout time.Duration) ([]mcptools.ServerStatus, error) {
	// No log: what it would say (a server is down, and why) is the output.
	m, err := mcptools.New(servers, mcptools.Options{ConnectTimeout: timeout})
	if err != nil {
		return nil, err
	}
	if err := m.Start(ctx); err != nil {
		return nil, err
	}
	defer func() { _ = m.Close(context.WithoutCancel(ctx)) }()
	if err := m.Register(&tools.Registry{}); err != nil {
		return nil, err
	}
	return m.Status(), nil
}

func printMCP(w io.Writer, status []mcptools.ServerStatus) {
	if len(status) == 0 {
		fmt.Fprintln(w, "No MCP servers are configured (mcp.servers in <home>/config.yaml, or BUB_MCP_SERVERS).")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, s := range status {
		fmt.Fprintf(tw, "%s (%s %s): %s\n", s.Name, s.Transport, s.Target, s.State)
		if s.Error != "" {
			fmt.Fprintf(tw, "  error: %s\n", s.Error)
		}
		for _, t := range s.Tools {
			note := t.Description
			if t.Skipped != "" {
				note = "skipped: " + t.Skipped
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", t.Name, t.Effect, note)
		}
	}
	_ = tw.Flush()
}
