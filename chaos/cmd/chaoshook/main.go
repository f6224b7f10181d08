// Command chaoshook is a misbehaving interceptor service for the chaos
// suite: with --mode slow it serves before_llm_call and answers "no
// opinion" after --delay; with --mode garbage it answers every
// before_llm_call request with bytes that are not a reply.
//
//	chaoshook --nats URL --name slow --mode slow --delay 50ms
//	chaoshook --nats URL --name garbage --mode garbage
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/hooks/interceptor"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/subjects"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "chaoshook:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("chaoshook", flag.ContinueOnError)
	url := fs.String("nats", os.Getenv("BUB_NATS_URL"), "NATS server URL")
	name := fs.String("name", "chaos", "service name")
	mode := fs.String("mode", "slow", "slow or garbage")
	delay := fs.Duration("delay", 50*time.Millisecond, "answer delay in slow mode")
	if err := fs.Parse(args); err != nil {
		return err
	}
	nc, err := nats.Connect(*url, nats.Name("chaoshook-"+*name), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond))
	if err != nil {
		return err
	}
	defer nc.Close()
	names := subjects.Default()
	switch *mode {
	case "slow":
		svc, err := interceptor.Serve(ctx, nc, names, &slow{name: *name, delay: *delay}, interceptor.WithName(*name))
		if err != nil {
			return err
		}
		defer func() { _ = svc.Stop(context.Background()) }()
	case "garbage":
		sub, err := nc.QueueSubscribe(names.Hook(*name, string(hooks.HookBeforeLLMCall)), *name, func(m *nats.Msg) {
			_ = m.Respond([]byte("}{ not a reply \x00\xff"))
		})
		if err != nil {
			return err
		}
		defer func() { _ = sub.Unsubscribe() }()
	default:
		return fmt.Errorf("unknown mode %q", *mode)
	}
	fmt.Fprintf(os.Stderr, "chaoshook %s serving in %s mode\n", *name, *mode)
	<-ctx.Done()
	return nil
}

// slow answers before_llm_call with no opinion after a delay.
type slow struct {
	name  string
	delay time.Duration
}

func (s *slow) Name() string { return s.name }

func (s *slow) BeforeLLMCall(ctx context.Context, _ hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	return nil, nil, nil
}

var _ hooks.LLMCallInterceptor = (*slow)(nil)
