package bubcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/pkg/config"
	"github.com/bubbus/bub/pkg/config/prompt"
	"github.com/bubbus/bub/pkg/hooks"
)

// newOnboard returns `bub onboard`: it collects a configuration with
// onboard (the startup registry's Startup().OnboardConfig) and writes it
// to <home>/config.yaml.
func newOnboard(getenv cli.Getenv, onboard func(ctx context.Context, in hooks.OnboardConfigInput) (map[string]any, error)) *cobra.Command {
	var (
		home           string
		sets           []string
		answersFrom    string
		nonInteractive bool
	)
	cmd := &cobra.Command{
		Use:   "onboard",
		Short: "Ask for the model and API settings and write <home>/config.yaml",
		Long: `Asks every plugin's onboarding questions (the builtin asks for the LLM
provider, model, API key and API base) and writes the answers to
<home>/config.yaml (mode 0600), replacing the file: only the collected keys
are kept. Settings in the file apply when neither a flag nor a BUB_*
variable sets them.

--set KEY=VALUE answers the question with that key (provider, model,
api_key, api_base, ...) without asking; --answers FILE reads KEY=VALUE
lines (blank lines and # comments skipped) from FILE, or from standard
input with "-" (which implies --non-interactive: keep secrets out of the
command line). --set wins over --answers. With --non-interactive every
other question takes its default. Ending the input at a prompt (Ctrl-D)
or Ctrl-C aborts and writes nothing.`,
		Example: `  bub onboard
  bub onboard --non-interactive --set model=openai:gpt-4o-mini
  printf 'api_key=%s\n' "$KEY" | bub onboard --answers - --set model=openrouter:openrouter/free`,
		Args:          cobra.NoArgs,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			values, err := onboardAnswers(cmd.InOrStdin(), answersFrom, sets)
			if err != nil {
				return fmt.Errorf("Onboarding failed: %w", err)
			}
			out := cmd.OutOrStdout()
			answers := &prompt.Answers{Values: values}
			if !nonInteractive && answersFrom != "-" {
				answers.Fallback = prompt.NewInteractive(cmd.InOrStdin(), out)
			}
			path := config.Path(home)
			fmt.Fprintf(out, "Bub %s onboarding: the answers will be saved to %s.\n", cli.Version(), path)
			cfg, err := onboard(cmd.Context(), hooks.OnboardConfigInput{Current: map[string]any{}, Prompter: answers})
			switch {
			case errors.Is(err, prompt.ErrAborted):
				return fmt.Errorf("%w; nothing was saved", prompt.ErrAborted)
			case err != nil:
				return fmt.Errorf("Onboarding failed: %w", err)
			}
			if unused := answers.Unused(); len(unused) > 0 {
				return fmt.Errorf("Onboarding failed: no question has the key %s (asked: %s); nothing was saved",
					strings.Join(unused, ", "), strings.Join(answers.Asked(), ", "))
			}
			if err := config.Save(path, cfg, answers.Asked()...); err != nil {
				return fmt.Errorf("Onboarding failed: %w", err)
			}
			fmt.Fprintf(out, "Saved config to %s\n", path)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&home, "home", config.DefaultHome(getenv), "bub home directory, where config.yaml is written (env BUB_HOME)")
	fs.StringArrayVar(&sets, "set", nil, "answer the question with this key: KEY=VALUE (repeatable)")
	fs.StringVar(&answersFrom, "answers", "", `read KEY=VALUE answers from this file ("-": standard input, implies --non-interactive)`)
	fs.BoolVar(&nonInteractive, "non-interactive", false, "ask nothing: unanswered questions take their defaults")
	return cmd
}

// onboardAnswers reads the answers of --answers (a file, or "-" for in)
// and then of every --set, which win.
func onboardAnswers(in io.Reader, from string, sets []string) (map[string]string, error) {
	values := map[string]string{}
	if from != "" {
		r := in
		if from != "-" {
			f, err := os.Open(from)
			if err != nil {
				return nil, fmt.Errorf("--answers: %w", err)
			}
			defer f.Close()
			r = f
		}
		var err error
		if values, err = prompt.ParseAnswers(r); err != nil {
			return nil, fmt.Errorf("--answers: %w", err)
		}
	}
	for i, s := range sets {
		k, v, err := prompt.ParsePair(s)
		if err != nil {
			return nil, fmt.Errorf("--set #%d: %w", i+1, err)
		}
		values[k] = v
	}
	return values, nil
}
