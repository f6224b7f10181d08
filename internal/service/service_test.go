package service_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/service"
)

// probe is a service that records what the shell gave it.
type probe struct {
	greeting string // its own flag, --greeting (env BUB_GREETING)
	ran      bool
	instance string
	conn     *service.Conn
	env      service.Env
}

func (p *probe) spec(env service.Env) service.Spec {
	p.env = env
	return service.Spec{
		Name:  "probe",
		Short: "A probe service",
		Bind: func(fs *pflag.FlagSet) {
			fs.StringVar(&p.greeting, "greeting", env.Getenv("BUB_GREETING"), "what to say (env BUB_GREETING)")
		},
		Run: func(ctx context.Context, conn *service.Conn, instance string, _ *slog.Logger) error {
			p.ran, p.instance, p.conn = true, instance, conn
			if !conn.NC.IsConnected() {
				return errors.New("not connected")
			}
			if _, err := conn.JS.AccountInfo(ctx); err != nil {
				return err
			}
			return nil
		},
	}
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// TestExecRunsTheServiceOnAConnection: a flag beats BUB_* which beats the
// home's config.yaml; the service runs on a live JetStream connection
// named after it, with the instance from BUB_INSTANCE, and the shell
// drains the connection when the service returns.
func TestExecRunsTheServiceOnAConnection(t *testing.T) {
	srv := natstest.Start(t)
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("greeting: from-file\nworkspace_note: kept\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"BUB_NATS_URL": srv.URL, "BUB_INSTANCE": "probe-1"}
	for _, c := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"--home", home}, "", "from-file"},
		{[]string{"--home", home}, "from-env", "from-env"},
		{[]string{"--home", home, "--greeting", "from-flag"}, "from-env", "from-flag"},
	} {
		vars["BUB_GREETING"] = c.env
		var p probe
		var stderr bytes.Buffer
		if err := service.Exec(t.Context(), c.args, env(vars), &bytes.Buffer{}, &stderr, p.spec); err != nil {
			t.Fatalf("%v: %v\n%s", c.args, err, stderr.String())
		}
		if !p.ran || p.greeting != c.want || p.instance != "probe-1" {
			t.Errorf("%v with BUB_GREETING=%q: ran %v, greeting %q (want %q), instance %q", c.args, c.env, p.ran, p.greeting, c.want, p.instance)
		}
		if !p.conn.NC.IsClosed() {
			t.Errorf("%v: the connection is still open after the service returned", c.args)
		}
		if name := p.conn.NC.Opts.Name; name != "probe" {
			t.Errorf("connection name %q, want probe", name)
		}
		if v, ok := p.env.Lookup("workspace_note"); !ok || v != "kept" {
			t.Errorf("Lookup(workspace_note) = %v, %v; want the config file's value", v, ok)
		}
		if !strings.Contains(stderr.String(), "probe.config") {
			t.Errorf("the effective configuration was not logged:\n%s", stderr.String())
		}
	}
}

// TestExecRefusesBeforeRunning: no NATS URL, an unknown flag, a stray
// argument and an invalid common setting each fail without running the
// service; --help prints the usage and runs nothing.
func TestExecRefusesBeforeRunning(t *testing.T) {
	home := t.TempDir()
	for _, c := range []struct {
		args []string
		vars map[string]string
		want string
	}{
		{[]string{"--home", home}, nil, service.ErrNoURL.Error()},
		{[]string{"--home", home, "--bogus"}, nil, "unknown flag: --bogus"},
		{[]string{"--home", home, "extra"}, nil, `unknown command "extra" for "probe"`},
		{[]string{"--home", home, "--log-format", "xml"}, nil, `log format "xml"`},
		{[]string{"--home", home}, map[string]string{"BUB_MAX_DELIVER": "0", "BUB_NATS_URL": "nats://127.0.0.1:1"}, "BUB_MAX_DELIVER"},
	} {
		var p probe
		err := service.Exec(t.Context(), c.args, env(c.vars), &bytes.Buffer{}, &bytes.Buffer{}, p.spec)
		if err == nil || !strings.Contains(err.Error(), c.want) || p.ran {
			t.Errorf("%v %v: err %v (want %q), ran %v", c.args, c.vars, err, c.want, p.ran)
		}
	}
	var p probe
	var out bytes.Buffer
	if err := service.Exec(t.Context(), []string{"--help"}, env(map[string]string{"BUB_HOME": home}), &out, &bytes.Buffer{}, p.spec); err != nil || p.ran {
		t.Fatalf("--help: %v, ran %v", err, p.ran)
	}
	for _, want := range []string{"A probe service\n\nUsage:\n  probe [flags]\n\nFlags:\n", "--greeting string", "(env BUB_GREETING)", "--nats string", "URL of the cluster, required", "-h, --help", "help for probe"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("usage lacks %q:\n%s", want, out.String())
		}
	}
}

// TestStopWhileStartingIsNotAFailure: a service whose start-up is cut
// short by its context (SIGTERM before it serves) returns its wrapped
// context.Canceled; the shell reports that as a clean stop. Any other
// error after the stop, and a cancellation without a stop, still fail.
func TestStopWhileStartingIsNotAFailure(t *testing.T) {
	srv := natstest.Start(t)
	vars := env(map[string]string{"BUB_NATS_URL": srv.URL})
	spec := func(fail func(ctx context.Context) error) func(service.Env) service.Spec {
		return func(service.Env) service.Spec {
			return service.Spec{Name: "probe", Short: "A probe service", Run: func(ctx context.Context, _ *service.Conn, _ string, _ *slog.Logger) error {
				return fail(ctx)
			}}
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	startup := spec(func(ctx context.Context) error {
		cancel()
		return fmt.Errorf("opening runtime scope: creating bucket: %w", ctx.Err())
	})
	if err := service.Exec(ctx, nil, vars, &bytes.Buffer{}, &bytes.Buffer{}, startup); err != nil {
		t.Errorf("stopped while starting: %v, want a clean stop", err)
	}
	ctx, cancel = context.WithCancel(t.Context())
	broken := spec(func(context.Context) error { cancel(); return errors.New("bucket has the wrong settings") })
	if err := service.Exec(ctx, nil, vars, &bytes.Buffer{}, &bytes.Buffer{}, broken); err == nil {
		t.Error("a failure that is not the stop was swallowed")
	}
	unasked := spec(func(context.Context) error { return fmt.Errorf("calling: %w", context.Canceled) })
	if err := service.Exec(t.Context(), nil, vars, &bytes.Buffer{}, &bytes.Buffer{}, unasked); err == nil {
		t.Error("a cancellation without a stop was swallowed")
	}
}

// TestExecEndsWhenTheConnectionIsClosed: a service whose NATS connection
// the client closes for good (here the server rejects a subject longer
// than its control line, which nats.go does not recover from) stops with
// ErrConnClosed and the server's reason, instead of serving on without
// NATS.
func TestExecEndsWhenTheConnectionIsClosed(t *testing.T) {
	srv := natstest.Start(t)
	spec := func(service.Env) service.Spec {
		return service.Spec{Name: "probe", Short: "A probe service",
			Run: func(ctx context.Context, conn *service.Conn, _ string, _ *slog.Logger) error {
				if err := conn.NC.Publish(strings.Repeat("a", 5000), nil); err != nil {
					return err
				}
				<-ctx.Done()
				return nil
			}}
	}
	done := make(chan error, 1)
	go func() {
		done <- service.Exec(t.Context(), []string{"--home", t.TempDir()}, env(map[string]string{"BUB_NATS_URL": srv.URL}), &bytes.Buffer{}, &bytes.Buffer{}, spec)
	}()
	select {
	case err := <-done:
		if !errors.Is(err, service.ErrConnClosed) || !strings.Contains(err.Error(), "maximum control line exceeded") {
			t.Fatalf("Exec: %v, want ErrConnClosed with the server's reason", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the service kept running on a closed connection")
	}
}
