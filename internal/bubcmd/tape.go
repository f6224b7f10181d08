package bubcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/internal/recordercmd"
	"github.com/bubbus/bub/internal/stack"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/tape"
	"github.com/bubbus/bub/pkg/taperec"
)

func newTape(env *Env) *cobra.Command {
	cmd := &cobra.Command{Use: "tape", Short: "Read and manage session tapes"}
	cmd.AddCommand(
		tapeCmd(env, "list", "List the sessions that have a tape", cobra.NoArgs, nil,
			func(ctx context.Context, c *tapeClient, _ []string, w io.Writer) error {
				names, err := c.store.List(ctx)
				for _, n := range names {
					fmt.Fprintln(w, n)
				}
				return err
			}),
		tapeShow(env),
		tapeCmd(env, "info SESSION", "Summarize a tape (entries, anchors, last token usage)", cobra.ExactArgs(1), nil,
			func(ctx context.Context, c *tapeClient, args []string, w io.Writer) error {
				info, err := c.tape(args[0]).Info(ctx)
				if err == nil {
					fmt.Fprintln(w, info)
				}
				return err
			}),
		tapeSearch(env),
		tapeCmd(env, "anchors SESSION", "List a tape's anchors", cobra.ExactArgs(1), nil,
			func(ctx context.Context, c *tapeClient, args []string, w io.Writer) error {
				anchors, err := c.tape(args[0]).Anchors(ctx, 20)
				if err != nil {
					return err
				}
				if len(anchors) == 0 {
					fmt.Fprintln(w, "(no anchors)")
				}
				for _, a := range anchors {
					fmt.Fprintf(w, "- %s\n", a.Name)
				}
				return nil
			}),
		tapeHandoff(env),
		tapeReset(env),
		tapeCmd(env, "export SESSION", "Write a tape as Bub JSONL ({id, kind, payload, meta, date} per line)", cobra.ExactArgs(1), nil,
			func(ctx context.Context, c *tapeClient, args []string, w io.Writer) error {
				entries, err := c.store.Fetch(ctx, args[0], tape.All())
				if err != nil {
					return err
				}
				return tape.WriteJSONL(w, entries)
			}),
		tapeImport(env),
	)
	return cmd
}

// tapeClient reads tapes and asks the recorder to write them.
type tapeClient struct {
	*client
	store tape.Store
}

func (c *tapeClient) tape(session string) tape.Tape {
	return tape.New(c.store, session, tape.Context{})
}

// withTapes runs body with the tape store of the cluster common connects
// to (the one provide_tape_store gives, as the recorder's).
func withTapes(ctx context.Context, env *Env, common *cli.Common, body func(ctx context.Context, c *tapeClient) error) error {
	err := withClient(ctx, common, env.Getenv, func(ctx context.Context, c *client) error {
		return recordercmd.WithTapeStore(ctx, c.conn, env.Plugins, c.log, func(store tape.Store) error {
			return body(ctx, &tapeClient{client: c, store: store})
		})
	})
	if errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrBucketNotFound) {
		// A tape command never creates the topology (a read must not
		// change it); say what does.
		err = fmt.Errorf("%w (the topology is not provisioned: start the services or run `bub provision` first)", err)
	}
	return err
}

// tapeCmd builds a tape subcommand that runs body with a tape client.
func tapeCmd(env *Env, use, short string, args cobra.PositionalArgs, flags func(*cobra.Command),
	body func(ctx context.Context, c *tapeClient, args []string, w io.Writer) error) *cobra.Command {
	getenv := env.Getenv
	common := cli.Common{Quiet: true}
	cmd := &cobra.Command{
		Use: use, Short: short, Args: args,
		RunE: func(cmd *cobra.Command, args []string) error {
			return withTapes(cmd.Context(), env, &common, func(ctx context.Context, c *tapeClient) error {
				return body(ctx, c, args, cmd.OutOrStdout())
			})
		},
	}
	common.Bind(cmd.Flags(), getenv)
	if flags != nil {
		flags(cmd)
	}
	return cmd
}

func tapeShow(env *Env) *cobra.Command {
	var asJSON bool
	return tapeCmd(env, "show SESSION", "Print a session's tape", cobra.ExactArgs(1),
		func(cmd *cobra.Command) { cmd.Flags().BoolVar(&asJSON, "json", false, "print Bub JSONL lines") },
		func(ctx context.Context, c *tapeClient, args []string, w io.Writer) error {
			entries, err := c.store.Fetch(ctx, args[0], tape.All())
			if err != nil {
				return err
			}
			if asJSON {
				return tape.WriteJSONL(w, entries)
			}
			for _, e := range entries {
				fmt.Fprintln(w, EntryLine(e))
			}
			return nil
		})
}

// EntryLine renders one entry readably: id, kind and the gist of its
// payload.
func EntryLine(e tape.Entry) string {
	var gist string
	switch e.Kind {
	case tape.KindMessage:
		role, _ := e.Payload["role"].(string)
		gist = role + ": " + compact(e.Payload["content"])
		if tc, ok := e.Payload["tool_calls"]; ok {
			gist += " tool_calls=" + compact(tc)
		}
	case tape.KindAnchor, tape.KindEvent:
		name, _ := e.Payload["name"].(string)
		gist = name
		if d, ok := e.Payload["data"]; ok {
			gist += " " + compact(d)
		} else if st, ok := e.Payload["state"]; ok {
			gist += " " + compact(st)
		}
	default:
		gist = compact(e.Payload)
	}
	if len(gist) > 200 {
		gist = gist[:197] + "..."
	}
	return fmt.Sprintf("%5d %-11s %s", e.ID, e.Kind, gist)
}

func compact(v any) string {
	if s, ok := v.(string); ok {
		return strings.ReplaceAll(s, "\n", "\\n")
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func tapeSearch(env *Env) *cobra.Command {
	var s tape.Search
	return tapeCmd(env, "search SESSION QUERY", "Search a tape (tape.search semantics)", cobra.ExactArgs(2),
		func(cmd *cobra.Command) {
			f := cmd.Flags()
			f.StringSliceVar(&s.Kinds, "kinds", nil, "entry kinds (default message,tool_result)")
			f.StringVar(&s.Start, "start", "", "earliest date (ISO date or datetime)")
			f.StringVar(&s.End, "end", "", "latest date (ISO date or datetime)")
			f.IntVar(&s.Limit, "limit", 20, "maximum results")
		},
		func(ctx context.Context, c *tapeClient, args []string, w io.Writer) error {
			s.Query = args[1]
			res, err := c.tape(args[0]).Search(ctx, s)
			if err == nil {
				fmt.Fprintln(w, res)
			}
			return err
		})
}

// publishTapeEvent asks the recorder (the only tape writer) to record a
// tape event for session, and waits until it is committed. With an
// embedded server it runs a recorder for the purpose.
func publishTapeEvent(ctx context.Context, c *tapeClient, session, name string, data map[string]any) (err error) {
	if c.cluster.Embedded() {
		svc, err := stack.StartServices(ctx, c.cluster, stack.Services{Recorder: &recordercmd.Options{Instance: "cli"}}, c.log)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, svc.Stop()) }()
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	before, err := c.store.Index(ctx, session)
	if err != nil {
		return err
	}
	ev, err := events.New(events.TypeTapeEvent, events.Attrs{Source: events.Source("cli", "bub"), SessionID: session}, events.TapeEventData{Name: name, Data: data})
	if err != nil {
		return err
	}
	msg, err := events.ToMsg(c.conn.Names.Event(session, events.SubjectName(events.TypeTapeEvent)), ev)
	if err != nil {
		return err
	}
	ack, err := c.conn.JS.PublishMsg(ctx, msg)
	if err != nil {
		return err
	}
	_, err = c.store.WaitWatermark(ctx, session, taperec.WatermarkEvents, max(ack.Sequence, before.Watermark(taperec.WatermarkEvents)))
	return err
}

func tapeHandoff(env *Env) *cobra.Command {
	var summary string
	return tapeCmd(env, "handoff SESSION NAME", "Add an anchor (later context starts after it)", cobra.ExactArgs(2),
		func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&summary, "summary", "", "summary kept in the anchor state")
		},
		func(ctx context.Context, c *tapeClient, args []string, w io.Writer) error {
			err := publishTapeEvent(ctx, c, args[0], taperec.EventHandoff, map[string]any{"name": args[1], "state": map[string]any{"summary": summary}})
			if err == nil {
				fmt.Fprintf(w, "anchor added: %s\n", args[1])
			}
			return err
		})
}

func tapeReset(env *Env) *cobra.Command {
	var archive bool
	return tapeCmd(env, "reset SESSION", "Empty a tape (optionally archiving it first)", cobra.ExactArgs(1),
		func(cmd *cobra.Command) { cmd.Flags().BoolVar(&archive, "archive", false, "archive the entries first") },
		func(ctx context.Context, c *tapeClient, args []string, w io.Writer) error {
			err := publishTapeEvent(ctx, c, args[0], taperec.EventReset, map[string]any{"archive": archive})
			if err == nil {
				fmt.Fprintln(w, "ok")
			}
			return err
		})
}

func tapeImport(env *Env) *cobra.Command {
	return tapeCmd(env, "import SESSION FILE", "Append the entries of a Bub JSONL tape file (Python Bub's format too)", cobra.ExactArgs(2), nil,
		func(ctx context.Context, c *tapeClient, args []string, w io.Writer) error {
			f, err := os.Open(args[1])
			if err != nil {
				return err
			}
			defer f.Close()
			entries, err := tape.ReadJSONL(f)
			if err != nil {
				return err
			}
			const chunk = 1000
			for i := 0; i < len(entries); i += chunk {
				batch := entries[i:min(i+chunk, len(entries))]
				if _, err := c.store.Append(ctx, args[0], batch); err != nil {
					return fmt.Errorf("importing entries %d-%d: %w", i+1, i+len(batch), err)
				}
				fmt.Fprintf(os.Stderr, "\rimported %d/%d", i+len(batch), len(entries))
			}
			fmt.Fprintf(w, "\nimported %d entries into %s\n", len(entries), args[0])
			return nil
		})
}
