package bubcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	ce "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/pkg/events"
)

func newEvents(env *Env) *cobra.Command {
	cmd := &cobra.Command{Use: "events", Short: "Watch lifecycle events"}
	cmd.AddCommand(newEventsTail(env))
	return cmd
}

func newEventsTail(env *Env) *cobra.Command {
	getenv := env.Getenv
	common := cli.Common{Quiet: true}
	var session, typ string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Print live lifecycle events, one line each (or JSON)",
		Long: `Subscribes to bub.events.> (or one session, or one event type) and prints
every lifecycle CloudEvent as it happens. Observers never affect control flow.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClient(cmd.Context(), &common, getenv, func(ctx context.Context, c *client) error {
				subject := c.conn.Names.EventsAll()
				switch {
				case session != "" && typ != "":
					subject = c.conn.Names.Event(session, events.SubjectName(typ))
				case session != "":
					subject = c.conn.Names.EventsOf(session)
				case typ != "":
					subject = c.conn.Names.EventsOfType(events.SubjectName(typ))
				}
				return tail(ctx, c.conn.NC, subject, asJSON, cmd.OutOrStdout())
			})
		},
	}
	common.Bind(cmd.Flags(), getenv)
	cmd.Flags().StringVar(&session, "session", "", "only this session's events")
	cmd.Flags().StringVar(&typ, "type", "", "only this event type (e.g. tool_call.started or dev.bub.tool_call.started.v1)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print each CloudEvent as JSON")
	return cmd
}

func tail(ctx context.Context, nc *nats.Conn, subject string, asJSON bool, w io.Writer) error {
	msgs := make(chan *nats.Msg, 1024)
	sub, err := nc.ChanSubscribe(subject, msgs)
	if err != nil {
		return fmt.Errorf("subscribing to %s: %w", subject, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-msgs:
			ev, err := events.FromMsg(m)
			if err != nil {
				fmt.Fprintf(w, "undecodable event on %s: %v\n", m.Subject, err)
				continue
			}
			if asJSON {
				// json.Marshal compacts the event to one line and rejects
				// one whose data is not the JSON its content type says.
				b, err := json.Marshal(ev)
				if err != nil {
					fmt.Fprintf(w, "undecodable event on %s: %v\n", m.Subject, err)
					continue
				}
				fmt.Fprintln(w, string(b))
				continue
			}
			fmt.Fprintln(w, EventLine(ev))
		}
	}
}

// lineBreaks escapes the line breaks of an event's data, so that its
// summary stays on the event's line.
var lineBreaks = strings.NewReplacer("\r", `\r`, "\n", `\n`)

// EventLine renders one event as a readable line:
// time, session, run/seq, type and a short summary of its data.
func EventLine(ev ce.Event) string {
	run := events.RunID(ev)
	if len(run) > 8 {
		run = run[len(run)-8:]
	}
	summary := lineBreaks.Replace(string(ev.Data()))
	if len(summary) > 160 {
		summary = summary[:157] + "..."
	}
	return fmt.Sprintf("%s %-20s %-8s #%-3d %-22s %s",
		ev.Time().Local().Format(time.TimeOnly+".000"), events.SessionID(ev), run, events.Seq(ev),
		events.SubjectName(ev.Type()), summary)
}
