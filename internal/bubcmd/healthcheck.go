package bubcmd

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spf13/cobra"
)

// newHealthcheck returns `bub healthcheck URL`, the container health probe
// of images that have no shell or curl (the compose images are FROM
// scratch): an HTTP GET that succeeds on a 2xx answer.
func newHealthcheck() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "healthcheck URL",
		Short: "Probe an HTTP health endpoint (exit 0 on 2xx), for container healthchecks",
		Long: `GETs URL — e.g. the ingress's http://127.0.0.1:8080/readyz, or
http://127.0.0.1:9464/healthz of a service run with --metrics-addr :9464 —
and exits 0 when it answers 2xx within --timeout, 1 otherwise.`,
		Args:         cobra.ExactArgs(1),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, args[0], nil)
			if err != nil {
				return err
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return fmt.Errorf("unhealthy: %w", err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			if resp.StatusCode/100 != 2 {
				return fmt.Errorf("unhealthy: %s: %s", resp.Status, body)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "healthy: %s %s", resp.Status, body)
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "how long to wait for the answer")
	return cmd
}
