package bubcmd

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/bubbus/bub/internal/bench"
)

func newBench() *cobra.Command {
	var (
		quick, failOnMiss bool
		out, binDir       string
		only              []string
		serve             bench.ServeConfig
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure the performance figures beside their limits and write BENCHMARKS.md",
		Long: `Runs the benchmark figures P1–P8 (hook dispatch, interceptor hop, pipeline
turns/s and latency with the JetStream messages and bytes stored per turn,
context read, worker memory over HTTPS/HTTP2 and HTTP/1.1, event publishing,
time to first token), each beside its limit measured in the same run (raw
NATS request/reply, a bare nats.go turn simulation, a bare SSE relay, …),
plus the all-in-one layout, 1/2/4 worker processes, a 3-node R3 cluster,
BUB_JS_SYNC=always and GOMAXPROCS=1 in every process, and writes the table
to --out, keeping the History
section of the file there and adding this run's row. Load runs on 127.0.0.1
only; servers and services are started as child processes from this binary
and the service binaries next to it (make build). --quick runs the main
table with short windows (about three minutes). The exit status is 0 when
the harness ran, whatever the verdicts, unless --fail-on-miss.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if serve.Role != "" {
				return bench.Serve(cmd.Context(), serve, cmd.ErrOrStderr())
			}
			self, err := os.Executable()
			if err != nil {
				return err
			}
			if binDir == "" {
				binDir = filepath.Dir(self)
			}
			rep, runErr := bench.Run(cmd.Context(), bench.Options{
				Quick: quick, Only: only, Self: self, BinDir: binDir, Progress: cmd.ErrOrStderr(),
			})
			if rep == nil {
				return runErr
			}
			if runErr != nil {
				rep.Sections = append(rep.Sections, bench.Section{Title: "Errors", Body: "```\n" + runErr.Error() + "\n```"})
			}
			// The history of the file written to goes on, with this run.
			var earlier []string
			if out != "-" {
				old, err := os.ReadFile(out)
				if err != nil && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
				earlier = bench.HistoryRows(old)
			}
			rep.AddHistory(earlier)
			var buf bytes.Buffer
			if err := rep.WriteMarkdown(&buf); err != nil {
				return err
			}
			if out == "-" {
				_, err = cmd.OutOrStdout().Write(buf.Bytes())
			} else {
				err = os.WriteFile(out, buf.Bytes(), 0o644)
			}
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			for _, t := range rep.Tables {
				for _, r := range t.Rows {
					fmt.Fprintf(w, "%-6s %-8s %s\n", r.ID, r.Result, r.Figure)
				}
			}
			if out != "-" {
				fmt.Fprintf(w, "bub bench: wrote %s (load average %s → %s)\n", out, rep.LoadBefore, rep.LoadAfter)
			}
			if runErr != nil {
				return runErr
			}
			if failed := rep.Failed(); failOnMiss && len(failed) > 0 {
				return fmt.Errorf("%d goal(s) missed", len(failed))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&quick, "quick", false, "short windows, main table only (about 3 minutes; for CI)")
	f.StringVar(&out, "out", "BENCHMARKS.md", `where to write the table ("-" = stdout)`)
	f.StringSliceVar(&only, "only", nil, "figures to run, e.g. P1,P3 (P1–P8, UP, SCALE, CLUSTER, SYNC, CPU1)")
	f.BoolVar(&failOnMiss, "fail-on-miss", false, "exit non-zero when a goal is missed")
	f.StringVar(&binDir, "bin-dir", "", "directory of the worker, recorder and ingress binaries (default: next to this one)")
	f.StringVar(&serve.Role, "serve", "", "run one load-test role in this process (used by the harness)")
	f.StringVar(&serve.URL, "nats", "", "NATS URL of a --serve role")
	f.StringVar(&serve.Params, "params", "", "turn pattern (JSON) of a --serve sim role")
	f.StringVar(&serve.Upstream, "upstream", "", "model API base URL of the --serve sse-relay role")
	for _, h := range []string{"serve", "nats", "params", "upstream"} {
		_ = f.MarkHidden(h)
	}
	return cmd
}
