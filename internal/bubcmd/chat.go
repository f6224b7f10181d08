package bubcmd

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/internal/ingress"
	"github.com/bubbus/bub/internal/workercmd"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
)

func newChat(env *Env) *cobra.Command {
	getenv := env.Getenv
	common := cli.Common{Quiet: true}
	var wo workercmd.Options
	var session, chatID string
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "chat",
		Short: "Chat with the agent: one turn per input line, replies streamed as they are generated",
		Long: `Reads lines from standard input and sends each as a message of the session;
token deltas are printed as the model produces them. ",quit" or ",exit"
(or end of input) leaves. Without --nats it runs an embedded NATS server
with a worker and a recorder in this process.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := workercmd.Load(getenv, &wo); err != nil {
				return err
			}
			if session == "" {
				session = "cli:" + chatID
			}
			out := &lockedWriter{w: cmd.OutOrStdout()}
			return withStack(cmd.Context(), &common, getenv, wo, func(ctx context.Context, c *client) error {
				return withGateway(c, getenv, func(gw *ingress.Gateway) error {
					var streamed atomic.Bool
					var shown streamedText
					sub, err := c.conn.NC.Subscribe(c.conn.Names.TokenStreamOf(session), func(m *nats.Msg) {
						var d streamDelta
						if json.Unmarshal(m.Data, &d) == nil && d.Kind == "text" {
							streamed.Store(true)
							fmt.Fprint(out, shown.unseen(d))
						}
					})
					if err != nil {
						return err
					}
					defer func() { _ = sub.Unsubscribe() }()
					return chatLoop(ctx, cmd.InOrStdin(), out, func(ctx context.Context, line string) error {
						streamed.Store(false)
						outs, err := ask(ctx, gw, &envelope.Envelope{ID: events.NewID(), Content: line, Channel: "cli", ChatID: chatID,
							SessionID: session, Context: envelope.NewContext("thread_id", session)}, wait)
						if err := c.conn.NC.Flush(); err != nil {
							return err
						}
						for _, o := range outs {
							if o.Kind == envelope.KindError || !streamed.Load() {
								fmt.Fprint(out, o.Content)
							}
						}
						fmt.Fprintln(out)
						return err
					})
				})
			})
		},
	}
	common.Bind(cmd.Flags(), getenv)
	workercmd.Bind(cmd.Flags(), &wo, env.Env)
	cmd.Flags().StringVar(&session, "session", "", "session id (default cli:<chat-id>)")
	cmd.Flags().StringVar(&chatID, "chat-id", "local", "chat id")
	cmd.Flags().DurationVar(&wait, "wait", 5*time.Minute, "how long to wait for each reply")
	return cmd
}

// lockedWriter serialises writes from the delta subscription and the
// input loop.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// chatLoop sends every non-empty input line until end of input or a quit
// command.
func chatLoop(ctx context.Context, in io.Reader, out io.Writer, send func(context.Context, string) error) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	fmt.Fprint(out, "bub> ")
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch line {
		case "":
		case ",quit", ",exit":
			return nil
		default:
			if err := send(ctx, line); err != nil {
				return err
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		fmt.Fprint(out, "bub> ")
	}
	return sc.Err()
}

// streamDelta is a token delta as the worker publishes it.
type streamDelta struct {
	Kind, Text, Turn string
	Step, Offset     int
}

// streamedText remembers how much text of each turn's step was shown, so
// that a step a resumed run streams again (docs/durable.md, "Streaming")
// is not shown twice. Deltas arrive on one subscription goroutine.
type streamedText struct {
	shown map[[2]any]int // by turn and step: bytes shown
}

// unseen returns the part of d's text not shown yet and records it shown.
func (s *streamedText) unseen(d streamDelta) string {
	if s.shown == nil {
		s.shown = map[[2]any]int{}
	}
	key := [2]any{d.Turn, d.Step}
	have := s.shown[key]
	end := d.Offset + len(d.Text)
	if end <= have {
		return ""
	}
	s.shown[key] = end
	return d.Text[max(0, have-d.Offset):]
}
