package bubcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/internal/natsx"
)

// provisionOutput is the --json output of `bub provision`.
type provisionOutput struct {
	DryRun  bool           `json:"dry_run"`
	Changes []natsx.Change `json:"changes"`
}

func newProvision(env *Env) *cobra.Command {
	getenv := env.Getenv
	common := cli.Common{Quiet: true}
	var dryRun, asJSON bool
	var channels []string
	cmd := &cobra.Command{
		Use:   "provision",
		Short: "Create or update every stream, bucket and shared consumer, idempotently, and print them",
		Long: `Creates what is missing of Bub's JetStream topology and updates what
differs (replicas, placement, subjects, retention, storage, limits…), the
same way every service does at start unless BUB_PROVISION=false, and prints
one line per stream, bucket and consumer: create, update (with the changed
settings) or unchanged. --dry-run changes nothing and prints what it would
do; --json prints the changes with each wanted configuration in the
JetStream API's JSON. Operators who manage the topology themselves (nats
CLI, Terraform, NACK) run the services with BUB_PROVISION=false. The
gateways' consumers are per channel: name each channel with
--gateway-channel.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return connect(cmd.Context(), &common, false, func(ctx context.Context, c *client) error {
				mode := natsx.Provision
				if dryRun {
					mode = natsx.DryRun
				}
				topo := c.conn.Topology
				changes, err := natsx.Apply(ctx, c.conn.JS, c.conn.Names, topo, mode, c.log)
				if err != nil {
					return err
				}
				for _, ch := range channels {
					cfg := topo.GatewayConsumer(c.conn.Names, ch)
					err := natsx.Retry(ctx, c.log, "consumer "+cfg.Durable, func(ctx context.Context) error {
						change, err := natsx.ApplyConsumer(ctx, c.conn.JS, c.conn.Names.OutboundStream(), cfg, mode, c.log)
						if err == nil {
							changes = append(changes, change)
						}
						return err
					})
					if err != nil {
						return err
					}
				}
				return printProvision(cmd.OutOrStdout(), provisionOutput{DryRun: dryRun, Changes: changes}, asJSON)
			})
		},
	}
	common.Bind(cmd.Flags(), getenv)
	common.BindTopology(cmd.Flags(), getenv)
	_ = cmd.Flags().MarkHidden("no-provision") // provisioning is what this command does
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "change nothing; print what would be created or updated")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the changes and configurations as JSON")
	cmd.Flags().StringSliceVar(&channels, "gateway-channel", nil, "also provision the gateway consumer of this channel (repeatable, comma list)")
	return cmd
}

func printProvision(w io.Writer, out provisionOutput, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	for _, c := range out.Changes {
		if out.DryRun && c.Action != natsx.ActionUnchanged {
			fmt.Fprint(w, "would ")
		}
		fmt.Fprintln(w, c)
	}
	return nil
}
