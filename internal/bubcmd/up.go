package bubcmd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/internal/gateway"
	"github.com/bubbus/bub/internal/gatewaycmd"
	"github.com/bubbus/bub/internal/ingresscmd"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/internal/recordercmd"
	"github.com/bubbus/bub/internal/service"
	"github.com/bubbus/bub/internal/stack"
	"github.com/bubbus/bub/internal/workercmd"
	"github.com/bubbus/bub/pkg/channels"
)

func newUp(env *Env) *cobra.Command {
	getenv := env.Getenv
	var common cli.Common
	var wo workercmd.Options
	var ingressOpts ingresscmd.Options
	var natsListen, services string
	var workers int
	var gf gatewaycmd.Flags
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Serve ingress, workers, the recorder and the gateway in one process until interrupted or a service fails",
		Long: `Starts the embedded NATS server (JetStream data under --home; clients may
connect on --nats-listen) and the services in this process, each over its
own connection exactly as separate processes would. --services= (empty)
serves NATS only, for running the service binaries separately. The
gateway runs when a channel other than http (served by ingress) and cli
(served by bub chat) is enabled (--enable-channel, BUB_ENABLED_CHANNELS).
When a service fails (e.g. a fail-closed interceptor is not running) the
others stop and bub up exits non-zero.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := common.Validate(); err != nil {
				return err
			}
			if err := workercmd.Load(getenv, &wo); err != nil {
				return err
			}
			want := splitList(services)
			for _, s := range want {
				if !slices.Contains([]string{"ingress", "worker", "recorder", "gateway"}, s) {
					return fmt.Errorf("unknown service %q: want ingress, worker, recorder, gateway", s)
				}
			}
			var gatewayOpts *gatewaycmd.Options
			if slices.Contains(want, "gateway") {
				var err error
				if gatewayOpts, err = upGateway(cmd.Context(), env, &gf); err != nil {
					return err
				}
			}
			log := common.Logger(cmd.ErrOrStderr())
			stopTelemetry, err := service.StartTelemetry(cmd.Context(), &common, "bub", log)
			if err != nil {
				return err
			}
			defer stopTelemetry()
			cl, err := stack.Open(&common, true, natsListen, log)
			if err != nil {
				return err
			}
			defer cl.Shutdown()
			if url := cl.URL(); url != "" && cl.Embedded() {
				unadvertise, err := advertise(common.Home, url)
				if err != nil {
					return err
				}
				defer unadvertise()
			}
			ctx := cmd.Context()
			conn, err := cl.Connect(ctx, "bub-up")
			if err != nil {
				return err
			}
			defer conn.Close()
			if err := natsx.EnsureTopologyLogged(ctx, conn.JS, conn.Names, conn.Topology, log); err != nil {
				return err
			}
			instance := cli.Instance(getenv)
			spec := stack.Services{}
			if slices.Contains(want, "worker") {
				wo.Instance = instance
				spec.Workers, spec.Worker = workers, wo
			}
			if slices.Contains(want, "recorder") {
				spec.Recorder = &recordercmd.Options{Instance: instance, Plugins: env.Plugins}
			}
			if slices.Contains(want, "ingress") {
				ingressOpts.Instance = instance
				spec.Ingress = &ingressOpts
			}
			if gatewayOpts != nil {
				gatewayOpts.Instance = instance
				spec.Gateway = gatewayOpts
			}
			svc, err := stack.StartServices(ctx, cl, spec, log)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "bub up: nats %s (data %s)\n", orNone(cl.URL()), common.Home)
			if spec.Ingress != nil {
				fmt.Fprintf(out, "bub up: http http://%s (POST /v1/messages)\n", svc.HTTPAddr())
			}
			fmt.Fprintf(out, "bub up: %d worker(s), recorder %v, gateway %v; Ctrl-C to stop\n", spec.Workers, spec.Recorder != nil, spec.Gateway != nil)
			select {
			case <-ctx.Done():
			case <-svc.Done(): // a service failed: stop the others, exit non-zero
			}
			fmt.Fprintln(out, "bub up: draining")
			return svc.Stop()
		},
	}
	common.Bind(cmd.Flags(), getenv)
	common.BindTopology(cmd.Flags(), getenv)
	workercmd.Bind(cmd.Flags(), &wo, env.Env)
	ingresscmd.Bind(cmd.Flags(), &ingressOpts.HTTP, getenv)
	cmd.Flags().StringVar(&natsListen, "nats-listen", cli.EnvOr(getenv, "BUB_NATS_LISTEN", "127.0.0.1:4222"), "address the embedded NATS server listens on (empty = in-process only; env BUB_NATS_LISTEN)")
	cmd.Flags().IntVar(&workers, "workers", 1, "worker instances in this process")
	gf.Bind(cmd.Flags(), env.Env)
	cmd.Flags().StringVar(&services, "services", "ingress,worker,recorder,gateway", "services to run (comma list; empty = NATS only); the gateway runs only when a channel besides http and cli is enabled")
	return cmd
}

// upGateway returns the gateway of `bub up`, or nil when no enabled
// channel needs one (only http and cli, or nothing, is enabled).
func upGateway(ctx context.Context, env *Env, gf *gatewaycmd.Flags) (*gatewaycmd.Options, error) {
	o, err := gf.Options(env.Env)
	if err != nil {
		return nil, err
	}
	selected, err := gateway.Selected(ctx, o.Channels, o.Enabled)
	if errors.Is(err, gateway.ErrNoChannels) || (err == nil && len(transportChannels(selected)) == 0) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &o, nil
}

// transportChannels returns the names of the selected channels that have a
// transport of their own, i.e. all but the builtin http (served by
// ingress) and cli (served by `bub chat`) channels: `bub up` runs a
// gateway only for them.
func transportChannels(selected []channels.Channel) []string {
	var out []string
	for _, ch := range selected {
		if n := ch.Name(); n != channels.HTTPName && n != channels.CLIName {
			out = append(out, n)
		}
	}
	return out
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "(in-process only)"
	}
	return s
}

func isEcho(model string) bool { return strings.HasPrefix(model, "echo:") || model == "echo" }
