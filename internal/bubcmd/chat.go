package bubcmd

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/bubbus/bub/internal/approvals"
	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/internal/ingress"
	"github.com/bubbus/bub/internal/natsx"
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
(or end of input) leaves. A tool call that waits for a person's approval
is shown while its turn runs: type y to approve it, n [reason] to deny.
Without --nats it runs an embedded NATS server
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
					handled := natsx.NewHandled()
					sub, err := c.conn.NC.Subscribe(c.conn.Names.TokenStreamOf(session), handled.Handler(func(m *nats.Msg) {
						var d streamDelta
						if json.Unmarshal(m.Data, &d) == nil && d.Kind == "text" {
							streamed.Store(true)
							fmt.Fprint(out, shown.unseen(d))
						}
					}))
					if err != nil {
						return err
					}
					defer func() { _ = sub.Unsubscribe() }()
					asked, err := newChatApprovals(ctx, c, session, out)
					if err != nil {
						return err
					}
					defer asked.stop()
					return chatLoop(ctx, cmd.InOrStdin(), out, asked.answer, func(ctx context.Context, line string) error {
						streamed.Store(false)
						outs, err := ask(ctx, gw, &envelope.Envelope{ID: events.NewID(), Content: line, Channel: "cli", ChatID: chatID,
							SessionID: session, Context: envelope.NewContext("thread_id", session)}, wait)
						// Every delta sent before the reply has arrived once
						// the connection is flushed; the handler prints it.
						if err := c.conn.NC.Flush(); err != nil {
							return err
						}
						if err := handled.Wait(sub); err != nil {
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

// maxChatLine bounds an input line of `bub chat`: what the NATS servers
// Bub ships take in one message. A longer line is reported and skipped.
const maxChatLine = natsx.MaxPayload

// chatLoop sends every non-empty input line until end of input or a quit
// command. A line typed while a turn runs goes to during (the answer to
// an approval the turn waits for). A line longer than maxChatLine is not
// sent: out says so and the loop goes on.
func chatLoop(ctx context.Context, in io.Reader, out io.Writer, during func(context.Context, string), send func(context.Context, string) error) error {
	r := bufio.NewReaderSize(in, 64<<10)
	lines := make(chan string)
	var readErr error // set before lines is closed
	go func() {
		defer close(lines)
		for {
			line, size, err := readLine(r, maxChatLine)
			if errors.Is(err, errLineTooLong) {
				fmt.Fprintf(out, "error: the line is %d bytes, more than the %d a message may take; not sent\n", size, maxChatLine)
				continue
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					readErr = err
				}
				return
			}
			select {
			case lines <- strings.TrimSpace(line):
			case <-ctx.Done():
				return
			}
		}
	}()
	fmt.Fprint(out, "bub> ")
	for line := range lines {
		switch line {
		case "":
		case ",quit", ",exit":
			return nil
		default:
			done := make(chan error, 1)
			go func() { done <- send(ctx, line) }()
			if quit, err := awaitTurn(lines, done, func(l string) { during(ctx, l) }); quit || err != nil {
				return err
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		fmt.Fprint(out, "bub> ")
	}
	return readErr
}

// errLineTooLong: readLine met a line longer than its limit.
var errLineTooLong = errors.New("line too long")

// readLine returns the next line of r without its line end, and its size
// in bytes. A line longer than limit is read to its end without being
// kept and fails with errLineTooLong; at the end of input it fails with
// io.EOF.
func readLine(r *bufio.Reader, limit int) (string, int, error) {
	var b []byte
	size := 0
	for {
		chunk, err := r.ReadSlice('\n')
		size += len(chunk)
		if size <= limit+1 { // the line and its '\n'
			b = append(b, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return "", 0, err
		}
		if size == 0 {
			return "", 0, io.EOF
		}
		n := size
		if len(chunk) > 0 && chunk[len(chunk)-1] == '\n' {
			n--
		}
		if n > limit {
			return "", n, errLineTooLong
		}
		return strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r"), n, nil
	}
}

// awaitTurn waits for a turn's send to return, giving the lines typed
// meanwhile to during; a quit command typed meanwhile (or the end of
// input) leaves once the turn ended.
func awaitTurn(lines <-chan string, done <-chan error, during func(string)) (quit bool, err error) {
	for {
		select {
		case err := <-done:
			return quit, err
		case l, ok := <-lines:
			switch {
			case !ok:
				return true, <-done
			case l == ",quit", l == ",exit":
				quit = true
			case l != "":
				during(l)
			}
		}
	}
}

// chatApprovals shows the approvals the session's turns wait for and
// answers them from the input lines: "y" approves, "n [reason]" denies.
type chatApprovals struct {
	store *approvals.Store
	out   io.Writer
	sub   *nats.Subscription

	mu      sync.Mutex
	pending []string // approval ids, oldest first
}

func newChatApprovals(ctx context.Context, c *client, session string, out io.Writer) (*chatApprovals, error) {
	store, err := approvals.Open(ctx, c.conn.JS, c.conn.Names)
	if err != nil {
		return nil, err
	}
	a := &chatApprovals{store: store, out: out}
	a.sub, err = c.conn.NC.Subscribe(c.conn.Names.Event(session, events.SubjectName(events.TypeApprovalRequested)), func(m *nats.Msg) {
		ev, err := events.Decode(m.Header, m.Data)
		var d events.ApprovalRequestedData
		if err != nil || events.DecodeData(ev, &d) != nil {
			return
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		if slices.Contains(a.pending, d.ID) {
			return // a redelivered turn asks again
		}
		a.pending = append(a.pending, d.ID)
		args, _ := json.Marshal(d.Arguments)
		fmt.Fprintf(out, "\n[approval %s] %s\n  %s %s (default at %s: %s)\n  answer y to approve, n [reason] to deny: ", d.ID, d.Reason, d.Tool, args, d.Deadline, d.Default)
	})
	if err != nil {
		return nil, err
	}
	return a, c.conn.NC.Flush()
}

func (a *chatApprovals) stop() { _ = a.sub.Unsubscribe() }

// answer answers the oldest pending approval with line.
func (a *chatApprovals) answer(ctx context.Context, line string) {
	a.mu.Lock()
	if len(a.pending) == 0 {
		a.mu.Unlock()
		fmt.Fprintln(a.out, "(the turn is running; wait for its reply)")
		return
	}
	id := a.pending[0]
	word, reason, _ := strings.Cut(line, " ")
	var approve bool
	switch strings.ToLower(word) {
	case "y", "yes", "approve":
		approve = true
	case "n", "no", "deny":
	default:
		a.mu.Unlock()
		fmt.Fprint(a.out, "answer y to approve, n [reason] to deny: ")
		return
	}
	a.pending = a.pending[1:]
	a.mu.Unlock()
	rec, err := a.store.Answer(ctx, id, approve, strings.TrimSpace(reason), "cli")
	if err != nil {
		fmt.Fprintln(a.out, err)
		return
	}
	fmt.Fprintf(a.out, "approval %s: %s\n", rec.ID, rec.Status)
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
