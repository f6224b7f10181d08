package bubcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/internal/dlq"
)

func newDLQ(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "Inspect and replay dead letters (messages no service could process)",
		Long: `Every message a service cannot decode or process after its retries is
terminated and copied to bub.dlq.<reason> (stream BUB_DLQ) with the reason,
the error, its original subject and its original headers. list shows them;
replay publishes them again to their original subject and removes them.`,
	}
	cmd.AddCommand(newDLQList(env), newDLQReplay(env))
	return cmd
}

func newDLQList(env *Env) *cobra.Command {
	getenv := env.Getenv
	var common cli.Common
	var reason string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List dead letters, oldest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClient(cmd.Context(), &common, getenv, func(ctx context.Context, c *client) error {
				letters, err := dlq.List(ctx, c.conn.JS, c.conn.Names, reason)
				if err != nil {
					return err
				}
				return printLetters(cmd.OutOrStdout(), letters, asJSON)
			})
		},
	}
	common.Bind(cmd.Flags(), getenv)
	cmd.Flags().StringVar(&reason, "reason", "", "only dead letters with this reason (e.g. undecodable, max_delivered)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print each dead letter as one JSON line (headers and data included)")
	return cmd
}

func printLetters(w io.Writer, letters []dlq.Letter, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		for _, l := range letters {
			if err := enc.Encode(l); err != nil {
				return err
			}
		}
		return nil
	}
	if len(letters) == 0 {
		fmt.Fprintln(w, "no dead letters")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tREASON\tSUBJECT\tEVENT ID\tERROR")
	for _, l := range letters {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", l.Seq, l.Time.Local().Format(time.DateTime), l.Reason, l.Subject, orDash(l.EventID), oneLine(l.Error, 80))
	}
	return tw.Flush()
}

func newDLQReplay(env *Env) *cobra.Command {
	getenv := env.Getenv
	var common cli.Common
	var reason string
	var ids []string
	var all bool
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "Publish dead letters again to their original subject and remove them",
		Long: `Replays the dead letters named by --id (their SEQ or EVENT ID from
'bub dlq list'), or every one with --all (optionally only those with
--reason). Each is published to its original subject with its original
headers, then removed from the dead-letter stream.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if all == (len(ids) > 0) {
				return errors.New("name dead letters with --id, or replay every one with --all")
			}
			return withClient(cmd.Context(), &common, getenv, func(ctx context.Context, c *client) error {
				letters, err := dlq.List(ctx, c.conn.JS, c.conn.Names, reason)
				if err != nil {
					return err
				}
				var pick []dlq.Letter
				found := map[string]bool{}
				for _, l := range letters {
					if all || slices.ContainsFunc(ids, func(id string) bool {
						if l.Matches(id) {
							found[id] = true
							return true
						}
						return false
					}) {
						pick = append(pick, l)
					}
				}
				var missing []string
				for _, id := range ids {
					if !found[id] {
						missing = append(missing, id)
					}
				}
				out := cmd.OutOrStdout()
				for _, l := range pick {
					if err := dlq.Replay(ctx, c.conn.JS, c.conn.Names, l); err != nil {
						return err
					}
					fmt.Fprintf(out, "replayed %d (%s) to %s\n", l.Seq, l.Reason, l.Subject)
				}
				fmt.Fprintf(out, "%d dead letter(s) replayed\n", len(pick))
				if len(missing) > 0 {
					return fmt.Errorf("no dead letter %s", strings.Join(missing, ", "))
				}
				return nil
			})
		},
	}
	common.Bind(cmd.Flags(), getenv)
	cmd.Flags().StringVar(&reason, "reason", "", "only dead letters with this reason")
	cmd.Flags().StringSliceVar(&ids, "id", nil, "dead letter to replay: its SEQ or EVENT ID (repeatable)")
	cmd.Flags().BoolVar(&all, "all", false, "replay every dead letter (of --reason, if given)")
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}
