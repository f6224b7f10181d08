package bubcmd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/bubbus/bub/internal/fakellm"
)

func newFakeLLM() *cobra.Command {
	var addr, script string
	cmd := &cobra.Command{
		Use:   "fake-llm",
		Short: "Serve a scripted fake OpenAI-compatible API (for tests and demos)",
		Long: `Serves POST /v1/chat/completions and GET /v1/models answering from a
script (see the internal/fakellm package documentation for its format);
without a script, or once it runs out, it echoes the last user message.
Point Bub at it with BUB_MODEL=openai:fake BUB_API_BASE=http://ADDR/v1.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var s fakellm.Script
			if script != "" {
				var err error
				if s, err = fakellm.LoadScript(script); err != nil {
					return err
				}
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return err
			}
			srv := &http.Server{Handler: fakellm.New(s), ReadHeaderTimeout: 10 * time.Second}
			fmt.Fprintf(cmd.OutOrStdout(), "fake-llm: http://%s/v1 (%d scripted steps)\n", ln.Addr(), len(s.Steps))
			errc := make(chan error, 1)
			go func() { errc <- srv.Serve(ln) }()
			select {
			case err := <-errc:
				return err
			case <-cmd.Context().Done():
			}
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8090", "listen address")
	cmd.Flags().StringVar(&script, "script", "", "script file (JSON)")
	return cmd
}
