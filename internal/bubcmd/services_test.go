package bubcmd

import (
	"bytes"
	"strings"
	"testing"

	"github.com/bubbus/bub/internal/gatewaycmd"
	"github.com/bubbus/bub/internal/ingresscmd"
	"github.com/bubbus/bub/internal/recordercmd"
	"github.com/bubbus/bub/internal/service"
	"github.com/bubbus/bub/internal/workercmd"
)

// TestServiceBinariesHaveBubsFlags: the command `bub <service>` is built
// on and the service binary (service.Exec, what cmd/<service> runs) print
// the same --help, defaults from the environment included, so the two
// have the same flags, defaults and environment variables.
func TestServiceBinariesHaveBubsFlags(t *testing.T) {
	vars := map[string]string{"BUB_HOME": t.TempDir(), "BUB_HTTP_ADDR": "127.0.0.1:9999", "BUB_WORKER_CONCURRENCY": "7"}
	for _, newSpec := range []func(service.Env) service.Spec{workercmd.Service, ingresscmd.Service, recordercmd.Service, gatewaycmd.Service} {
		env := testEnv(vars)
		cmd := newServiceCommand(env, newSpec)
		var bub bytes.Buffer
		cmd.SetOut(&bub)
		cmd.SetArgs([]string{"--help"})
		if err := cmd.Execute(); err != nil {
			t.Fatal(err)
		}
		name := cmd.Name()
		var bin bytes.Buffer
		if err := service.Exec(t.Context(), []string{"--help"}, env.Getenv, &bin, &bytes.Buffer{}, newSpec); err != nil {
			t.Fatal(err)
		}
		if bin.Len() == 0 || bin.String() != bub.String() {
			t.Errorf("%s --help differs from bub %s --help:\n--- binary\n%s\n--- bub\n%s", name, name, bin.String(), bub.String())
		}
		if want := map[string]string{"worker": "(default 7)", "ingress": `(default "127.0.0.1:9999")`}[name]; !strings.Contains(bin.String(), want) {
			t.Errorf("%s --help lacks the default from the environment %s:\n%s", name, want, bin.String())
		}
	}
}
