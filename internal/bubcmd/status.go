package bubcmd

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/internal/status"
)

func newStatus(env *Env) *cobra.Command {
	getenv := env.Getenv
	var common cli.Common
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show streams, consumers, services, workers, interceptors and recorder lag",
		Long: `Prints the state of a Bub deployment as NATS sees it: the server's
max_payload, every Bub stream with its message count, every consumer with
pending and ack-pending counts, every running instance of a Bub service
(ingress, worker, recorder, gateway) found through NATS micro discovery,
with its version, the max_payload it sends by and uptime (a warning names
an instance whose max_payload is not the server's: a client learns it
only when it connects), the workers (running turns of each instance;
turns running in the turn registry and pull requests waiting on the
shared consumer), the interceptor services discovered through NATS micro
with their request statistics, the recorder's lag and the dead letters by
reason.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClient(cmd.Context(), &common, getenv, func(ctx context.Context, c *client) error {
				st := status.Collect(ctx, c.conn.NC, c.conn.JS, c.conn.Names)
				return printReport(cmd.OutOrStdout(), asJSON, st, printStatus)
			})
		},
	}
	common.Bind(cmd.Flags(), getenv)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON")
	return cmd
}

// printStatus renders st as aligned tables.
func printStatus(w io.Writer, st *status.Status) {
	fmt.Fprintf(w, "NATS %s (server %s, max_payload %s, JetStream: %d streams, %d consumers, %s stored)\n",
		st.Server.URL, st.Server.Version, bytesText(uint64(st.Server.MaxPayload)), st.Server.Streams, st.Server.Consumers, bytesText(st.Server.Storage))

	fmt.Fprintln(w, "\nSTREAMS")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tMESSAGES\tBYTES\tFIRST\tLAST\tCONSUMERS\tLAST MESSAGE\tREPLICAS\tLEADER\tFOLLOWER LAG\t")
	for _, s := range st.Streams {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%s\t%d\t%s\t%s\t\n", s.Name, s.Messages, bytesText(s.Bytes), s.FirstSeq, s.LastSeq, s.Consumers, ago(s.LastTime),
			s.Replicas, orDash(s.Leader), followerLag(s.Followers))
	}
	_ = tw.Flush()

	fmt.Fprintln(w, "\nCONSUMERS")
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STREAM\tCONSUMER\tPENDING\tACK PENDING\tREDELIVERED\tWAITING\tLAST DELIVERY\t")
	for _, c := range st.Consumers {
		last := "-"
		if c.LastActive != nil {
			last = ago(*c.LastActive)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t\n", c.Stream, c.Name, c.Pending, c.AckPending, c.Redelivered, c.Waiting, last)
	}
	_ = tw.Flush()

	printSection(w, "SERVICES (NATS micro)", "SERVICE\tINSTANCE\tVERSION\tMAX_PAYLOAD\tUP\t", st.Services, func(si status.ServiceInstance) string {
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t", si.Service, si.Instance, si.Version, bytesText(uint64(si.MaxPayload)), since(si.Started))
	})
	printSection(w, "WORKERS (NATS micro)", "INSTANCE\tVERSION\tRUNNING\tCONCURRENCY\tUP\t", st.Workers.Instances, func(wi status.WorkerInstance) string {
		return fmt.Sprintf("%s\t%s\t%d\t%d\t%s\t", wi.Instance, wi.Version, wi.RunningTurns, wi.Concurrency, since(wi.Started))
	})
	running := 0
	for _, v := range st.Workers.RunningTurns {
		running += v
	}
	fmt.Fprintf(w, "  running turns (turn registry): %d", running)
	for _, owner := range slices.Sorted(maps.Keys(st.Workers.RunningTurns)) {
		fmt.Fprintf(w, "  %s=%d", owner, st.Workers.RunningTurns[owner])
	}
	fmt.Fprintf(w, "\n  pull requests waiting on the shared consumer: %d\n", st.Workers.WaitingPulls)

	printSection(w, "INTERCEPTORS (NATS micro)", "SERVICE\tVERSION\tINSTANCE\tHOOKS\tREQUESTS\tERRORS\tAVG TIME\tUP", st.Interceptors, func(is status.Interceptor) string {
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s", is.Service, is.Version, is.ID, strings.Join(is.Hooks, ","),
			is.Requests, is.Errors, is.Average.Round(time.Microsecond), since(is.Started))
	})

	fmt.Fprintln(w, "\nRECORDER")
	if r := st.Recorder; r != nil {
		fmt.Fprintf(w, "  lag: %d events not yet committed (%d not yet delivered, %d delivered and held", r.Lag, r.Pending, r.AckPending)
		if r.OldestHeld > 0 {
			fmt.Fprintf(w, "; the oldest is %d behind the stream head", r.OldestHeld)
		}
		fmt.Fprintln(w, ")")
	} else {
		fmt.Fprintln(w, "  no recorder consumer")
	}

	fmt.Fprintln(w, "\nDEAD LETTERS")
	fmt.Fprintf(w, "  %d", st.DeadLetters.Messages)
	for _, r := range slices.Sorted(maps.Keys(st.DeadLetters.ByReason)) {
		fmt.Fprintf(w, "  %s=%d", r, st.DeadLetters.ByReason[r])
	}
	fmt.Fprintln(w)
	for _, e := range st.Errors {
		fmt.Fprintln(w, "\nwarning:", e)
	}
}

// printSection prints a titled table, its header and a line per row of
// tab-separated cells, or "none running" without rows.
func printSection[T any](w io.Writer, title, header string, rows []T, line func(T) string) {
	fmt.Fprintln(w, "\n"+title)
	if len(rows) == 0 {
		fmt.Fprintln(w, "  none running")
		return
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  "+header)
	for _, r := range rows {
		fmt.Fprintln(tw, "  "+line(r))
	}
	_ = tw.Flush()
}

func bytesText(b uint64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}

// ago renders how long ago t was ("-" for the zero time).
func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return since(t) + " ago"
}

func since(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := time.Since(t)
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

// followerLag renders each follower's lag, "n2=0 n3=12(offline)", or
// "-" for a stream without followers.
func followerLag(fs []status.Replica) string {
	if len(fs) == 0 {
		return "-"
	}
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = fmt.Sprintf("%s=%d", f.Name, f.Lag)
		switch {
		case f.Offline:
			parts[i] += "(offline)"
		case !f.Current:
			parts[i] += "(behind)"
		}
	}
	return strings.Join(parts, " ")
}
