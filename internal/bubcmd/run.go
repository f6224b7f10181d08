package bubcmd

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/internal/ingress"
	"github.com/bubbus/bub/internal/recordercmd"
	"github.com/bubbus/bub/internal/service"
	"github.com/bubbus/bub/internal/stack"
	"github.com/bubbus/bub/internal/workercmd"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
)

func newRun(env *Env) *cobra.Command {
	getenv := env.Getenv
	common := cli.Common{Quiet: true}
	var wo workercmd.Options
	var session, channel, chatID, sender string
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "run MESSAGE",
		Short: "Send one message through the pipeline and print the reply",
		Long: `Sends MESSAGE through ingress → worker → recorder exactly like the
distributed deployment and prints every outbound envelope of the turn.
Without --nats it starts an embedded NATS server with a worker and a
recorder in this process (data under --home) and stops them afterwards.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := workercmd.Load(getenv, &wo); err != nil {
				return err
			}
			env := &envelope.Envelope{
				ID: events.NewID(), Content: args[0], Channel: channel, ChatID: chatID,
				SessionID: session, Context: envelope.NewContext("sender_id", sender),
			}
			return withStack(cmd.Context(), &common, getenv, wo, func(ctx context.Context, c *client) error {
				if wo.Models.Model == "" || isEcho(wo.Models.Model) {
					fmt.Fprintln(cmd.ErrOrStderr(), "note: using the built-in echo model (set BUB_MODEL, e.g. openai:gpt-4o-mini, to use a real one)")
				}
				return withGateway(c, getenv, func(gw *ingress.Gateway) error {
					outs, err := ask(ctx, gw, env, wait)
					printOutbounds(cmd.OutOrStdout(), outs)
					if err != nil {
						return fmt.Errorf("waiting for the reply to %s: %w", env.ID, err)
					}
					return nil
				})
			})
		},
	}
	common.Bind(cmd.Flags(), getenv)
	workercmd.Bind(cmd.Flags(), &wo, env.Env)
	cmd.Flags().StringVar(&session, "session", "", "session id (default <channel>:<chat-id>)")
	cmd.Flags().StringVar(&channel, "channel", "cli", "channel of the message")
	cmd.Flags().StringVar(&chatID, "chat-id", "local", "chat id of the message")
	cmd.Flags().StringVar(&sender, "sender-id", "human", "sender id put in the message context")
	cmd.Flags().DurationVar(&wait, "wait", 5*time.Minute, "how long to wait for the reply")
	return cmd
}

// withGateway runs body with an ingress gateway of the CLI on c's
// connection, closed when body returns.
func withGateway(c *client, getenv cli.Getenv, body func(*ingress.Gateway) error) error {
	gw, err := ingress.NewGateway(c.conn.NC, c.conn.JS, c.conn.Names, events.Source("cli", cli.Instance(getenv)), c.log)
	if err != nil {
		return err
	}
	defer gw.Close()
	return body(gw)
}

// ask publishes env through gw and returns the turn's outbound envelopes,
// waiting for them at most wait.
func ask(ctx context.Context, gw *ingress.Gateway, env *envelope.Envelope, wait time.Duration) ([]envelope.Envelope, error) {
	await := gw.Expect(env.ID)
	if _, err := gw.Publish(ctx, env); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	return await(wctx)
}

// printOutbounds prints each envelope as Bub's `bub run` does:
// "[<channel>:<chat_id>]" then the content.
func printOutbounds(w io.Writer, outs []envelope.Envelope) {
	for _, o := range outs {
		ch := o.OutputChannel
		if ch == "" {
			ch = o.Channel
		}
		if ch == "" {
			ch = "stdout"
		}
		chat := o.ChatID
		if chat == "" {
			chat = "local"
		}
		fmt.Fprintf(w, "[%s:%s]\n%s\n", ch, chat, o.Content)
	}
}

// withStack runs body with a client. Without a cluster URL (and without a
// running `bub up`) it starts an embedded server plus a worker and a
// recorder for the duration of body, and lets the recorder finish the
// turn's tape before stopping.
func withStack(ctx context.Context, common *cli.Common, getenv cli.Getenv, wo workercmd.Options, body func(context.Context, *client) error) error {
	return withClient(ctx, common, getenv, func(ctx context.Context, c *client) error {
		stopTelemetry, err := service.StartTelemetry(ctx, common, "bub", c.log)
		if err != nil {
			return err
		}
		defer stopTelemetry()
		if !c.cluster.Embedded() {
			return body(ctx, c)
		}
		wo.Instance = cli.Instance(getenv)
		svc, err := stack.StartServices(ctx, c.cluster, stack.Services{
			Workers:  1,
			Worker:   wo,
			Recorder: &recordercmd.Options{Instance: wo.Instance, Plugins: wo.Plugins},
		}, c.log)
		if err != nil {
			return err
		}
		berr := body(ctx, c)
		idle, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := stack.WaitRecorded(idle, c.conn); err != nil && berr == nil {
			c.log.Warn("recorder.not_idle", "err", err)
		}
		if err := svc.Stop(); err != nil && berr == nil {
			berr = err
		}
		return berr
	})
}
