package bubcmd

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/llm/providers"
	"github.com/bubbus/bub/pkg/replay"
	"github.com/bubbus/bub/pkg/tape"
)

// newReplay is `bub replay`: the recorded turns of a session (a live tape,
// or an exported JSONL file) re-run through this build's agent loop and
// plugins, with the recorded model answers unless --live-model.
func newReplay(env *Env) *cobra.Command {
	var (
		file, workspace string
		live            bool
	)
	common := cli.Common{Quiet: true}
	cmd := &cobra.Command{
		Use:   "replay [SESSION]",
		Short: "Re-run a recorded session through this build and diff it against the recording",
		Long: `Re-run the recorded turns of SESSION's tape (or of --file, a tape exported
with bub tape export) through this build's agent loop and plugins. Each model
call is answered with the model's recorded answer (--live-model calls the
configured model instead); no tool runs: each call gets its recorded result.
Per turn it prints whether the outbound text, the tool calls and the hook
decisions match, each divergence, and a unified diff of what differs. It
exits 1 when any turn differs.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (file == "") == (len(args) == 0) || len(args) == 1 && args[0] == "" {
				return errors.New("replay: give a SESSION or --file TAPE.jsonl (one of them)")
			}
			o := replay.Options{Plugins: env.Plugins, Workspace: workspace, Log: env.Logger()}
			if live {
				cfg, err := llm.ConfigFromEnv(env.Getenv)
				if err != nil {
					return err
				}
				router, err := providers.NewRouter(cfg, llm.WithLogger(env.Logger()))
				if err != nil {
					return err
				}
				o.Models = router
			}
			var rep replay.Report
			var err error
			if file != "" {
				rep, err = replay.File(cmd.Context(), file, o)
			} else {
				err = withTapes(cmd.Context(), env, &common, func(ctx context.Context, c *tapeClient) error {
					entries, err := c.store.Fetch(ctx, args[0], tape.All())
					if err != nil {
						return err
					}
					rep, err = replay.Session(ctx, args[0], entries, o)
					return err
				})
			}
			if err != nil {
				return err
			}
			if err := rep.Write(cmd.OutOrStdout()); err != nil {
				return err
			}
			switch {
			case len(rep.Results) == 0:
				return fmt.Errorf("replay: %s holds no recorded turn", rep.Session)
			case !rep.Identical():
				return errReplayDiffers
			}
			return nil
		},
	}
	common.Bind(cmd.Flags(), env.Getenv)
	wd, _ := os.Getwd()
	cmd.Flags().StringVar(&file, "file", "", "replay this exported JSONL tape instead of a live session")
	cmd.Flags().BoolVar(&live, "live-model", false, "call the configured model (BUB_MODEL and friends) instead of answering from the recording")
	cmd.Flags().StringVar(&workspace, "workspace", cli.EnvOr(env.Getenv, "BUB_WORKSPACE", wd), "workspace of the replayed turns' state and skills (env BUB_WORKSPACE)")
	return cmd
}

// errReplayDiffers is the error (exit 1) of a replay with a turn that
// differs; the report above it says which.
var errReplayDiffers = errors.New("replay: the session does not replay as recorded (see the diff above)")
