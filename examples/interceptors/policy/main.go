// Command policy is an example Bub interceptor service, a thin shell over
// interceptor.Serve: it denies the tools listed in POLICY_DENY_TOOLS and
// rewrites the model of LLM calls to POLICY_MODEL. Run as many instances
// as you like; they share the load as one NATS queue group.
//
//	POLICY_DENY_TOOLS=bash policy --nats nats://127.0.0.1:4222
//	BUB_INTERCEPTORS=policy BUB_INTERCEPTOR_POLICY_FAILURE=closed worker ...
//
// Flags beat environment variables:
//
//	--nats        BUB_NATS_URL       NATS server URL (default nats://127.0.0.1:4222)
//	--nats-creds  BUB_NATS_CREDS     NATS credentials file
//	--prefix      BUB_PREFIX         root of the subjects (default bub)
//	--name        POLICY_NAME        service name (default policy)
//	--deny-tools  POLICY_DENY_TOOLS  comma list of tools to deny (bash, fs.write, …)
//	--ask-tools   POLICY_ASK_TOOLS   comma list of tools a person must approve (docs/hooks.md, "Approvals")
//	--ask-timeout POLICY_ASK_TIMEOUT how long an approval waits (default 1h)
//	--ask-default POLICY_ASK_DEFAULT what applies when nobody answered in time: deny (default) or proceed
//	--model       POLICY_MODEL       "provider:model" every LLM call is rewritten to
//	--model-from  POLICY_MODEL_FROM  rewrite only calls to this model
//	--concurrency POLICY_CONCURRENCY calls of each hook served at once, as that many NATS micro instances (default 1)
//
// It serves before_tool_call when tools are denied or asked about, and before_llm_call
// when a model is set, and drains on SIGTERM or SIGINT.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/bubbus/bub/pkg/hooks/interceptor"
	"github.com/bubbus/bub/pkg/subjects"
	"github.com/bubbus/bub/pkg/tools"
)

// shutdownGrace bounds stopping the service and draining the connection.
const shutdownGrace = 10 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "policy:", err)
		os.Exit(1)
	}
}

// run serves the policy until ctx ends, then drains.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	env := func(key, def string) string {
		if v := getenv(key); v != "" {
			return v
		}
		return def
	}
	fs := flag.NewFlagSet("policy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("nats", env("BUB_NATS_URL", nats.DefaultURL), "NATS server URL (env BUB_NATS_URL)")
	creds := fs.String("nats-creds", getenv("BUB_NATS_CREDS"), "NATS credentials file (env BUB_NATS_CREDS)")
	prefix := fs.String("prefix", env("BUB_PREFIX", subjects.DefaultPrefix), "root of the subjects (env BUB_PREFIX)")
	name := fs.String("name", env("POLICY_NAME", "policy"), "service name (env POLICY_NAME)")
	deny := fs.String("deny-tools", getenv("POLICY_DENY_TOOLS"), "comma list of tools to deny (env POLICY_DENY_TOOLS)")
	ask := fs.String("ask-tools", getenv("POLICY_ASK_TOOLS"), "comma list of tools a person must approve (env POLICY_ASK_TOOLS)")
	askTimeout := fs.String("ask-timeout", env("POLICY_ASK_TIMEOUT", "1h"), "how long an approval waits (env POLICY_ASK_TIMEOUT)")
	askDefault := fs.String("ask-default", env("POLICY_ASK_DEFAULT", "deny"), "deny or proceed when nobody answered in time (env POLICY_ASK_DEFAULT)")
	model := fs.String("model", getenv("POLICY_MODEL"), "model every LLM call is rewritten to (env POLICY_MODEL)")
	from := fs.String("model-from", getenv("POLICY_MODEL_FROM"), "rewrite only calls to this model (env POLICY_MODEL_FROM)")
	concurrency := fs.Int("concurrency", 1, "calls of each hook served at once, as that many NATS micro instances (env POLICY_CONCURRENCY)")
	if v := getenv("POLICY_CONCURRENCY"); v != "" {
		if err := fs.Set("concurrency", v); err != nil {
			return fmt.Errorf("POLICY_CONCURRENCY: %w", err)
		}
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("service", *name)
	timeout, err := time.ParseDuration(*askTimeout)
	if err != nil {
		return fmt.Errorf("--ask-timeout: %w", err)
	}
	p, err := newPolicy(*deny, *ask, askRules{Timeout: timeout, Default: tools.Action(*askDefault)}, *model, *from, log)
	if err != nil {
		return err
	}
	names, err := subjects.New(*prefix)
	if err != nil {
		return err
	}

	// The closed handler must be set before the micro service is added.
	closed := make(chan struct{})
	opts := []nats.Option{nats.Name("bub-interceptor-" + *name), nats.ClosedHandler(func(*nats.Conn) { close(closed) })}
	if *creds != "" {
		opts = append(opts, nats.UserCredentials(*creds))
	}
	nc, err := nats.Connect(*url, opts...)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", *url, err)
	}
	svc, err := interceptor.Serve(ctx, nc, names, p, interceptor.WithName(*name), interceptor.WithLogger(log), interceptor.WithConcurrency(*concurrency),
		interceptor.WithDescription("Bub example policy: deny tools, rewrite models"))
	if err != nil {
		nc.Close()
		return err
	}
	log.Info("policy.serving", "nats", *url, "hooks", svc.Hooks(), "deny_tools", *deny, "ask_tools", *ask, "model", *model, "model_from", *from)

	<-ctx.Done()
	log.Info("policy.draining")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	err = svc.Stop(sctx)
	if derr := nc.Drain(); derr != nil {
		return errors.Join(err, derr)
	}
	select {
	case <-closed:
	case <-sctx.Done():
		nc.Close()
		return errors.Join(err, errors.New("connection did not drain in time"))
	}
	return err
}

// splitList splits a comma list, dropping blanks.
func splitList(s string) []string {
	var out []string
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
