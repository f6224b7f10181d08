package stack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"

	"github.com/bubbus/bub/internal/gatewaycmd"
	"github.com/bubbus/bub/internal/ingresscmd"
	"github.com/bubbus/bub/internal/recorder"
	"github.com/bubbus/bub/internal/recordercmd"
	"github.com/bubbus/bub/internal/service"
	"github.com/bubbus/bub/internal/workercmd"
)

// Services says which services [StartServices] runs in this process.
type Services struct {
	// Ingress, when set, serves the HTTP API.
	Ingress *ingresscmd.Options
	// Workers is the number of worker instances (0 = none).
	Workers int
	Worker  workercmd.Options
	// Recorder, when set, runs the recorder.
	Recorder *recordercmd.Options
	// Gateway, when set, runs the gateway (its channels).
	Gateway *gatewaycmd.Options
}

// Running is a set of services started by [StartServices].
type Running struct {
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	done     chan struct{}
	doneOnce sync.Once
	mu       sync.Mutex
	errs     []error
	starting map[string]bool // workers not yet consuming, by label
	conns    []*service.Conn
	httpAddr string
}

// StartServices starts the services of spec, each over its own connection
// to cl and announced as its own NATS micro service (exactly as separate
// processes would run them). When one fails
// the others are stopped and [Running.Done] is closed; the ingress's
// readiness (GET /readyz) answers 503 with the reason while a service has
// failed or a worker has not started consuming.
func StartServices(ctx context.Context, cl *Cluster, spec Services, log *slog.Logger) (*Running, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &Running{cancel: cancel, done: make(chan struct{}), starting: map[string]bool{}}
	start := func(name, instance, label string, run func(ctx context.Context, conn *service.Conn) error) error {
		conn, err := cl.Connect(ctx, name)
		if err != nil {
			return err
		}
		r.conns = append(r.conns, conn)
		if err := conn.Announce(name, instance); err != nil {
			return err
		}
		r.wg.Go(func() {
			// A connection closed for good fails the service (and so the
			// stack) with ErrConnClosed, instead of leaving it without NATS.
			err := conn.RunUntilClosed(ctx, func(ctx context.Context) error { return run(ctx, conn) })
			if err != nil && ctx.Err() == nil {
				log.Error("service.failed", "service", label, "err", err)
				r.mu.Lock()
				r.errs = append(r.errs, fmt.Errorf("%s: %w", label, err))
				r.mu.Unlock()
				r.doneOnce.Do(func() { close(r.done) })
				cancel()
			}
		})
		return nil
	}
	var err error
	if spec.Recorder != nil {
		o := *spec.Recorder
		err = errors.Join(err, start("recorder", o.Instance, "recorder", func(ctx context.Context, c *service.Conn) error {
			return recordercmd.Run(ctx, c, o, log.With("service", "recorder"))
		}))
	}
	for i := range spec.Workers {
		o := spec.Worker
		o.Instance = fmt.Sprintf("%s-w%d", o.Instance, i)
		label := fmt.Sprintf("worker %d", i)
		r.starting[label] = true
		o.OnStarted = func() {
			r.mu.Lock()
			delete(r.starting, label)
			r.mu.Unlock()
		}
		err = errors.Join(err, start("worker", o.Instance, label, func(ctx context.Context, c *service.Conn) error {
			return workercmd.Run(ctx, c, o, log.With("service", "worker", "worker", i))
		}))
	}
	if spec.Gateway != nil {
		o := *spec.Gateway
		err = errors.Join(err, start("gateway", o.Instance, "gateway", func(ctx context.Context, c *service.Conn) error {
			return gatewaycmd.Run(ctx, c, o, log.With("service", "gateway"))
		}))
	}
	if spec.Ingress != nil {
		o := *spec.Ingress
		if o.Listener == nil {
			addr := o.HTTP.Addr
			if addr == "" {
				addr = "127.0.0.1:8080"
			}
			ln, lerr := net.Listen("tcp", addr)
			if lerr != nil {
				err = errors.Join(err, fmt.Errorf("ingress listen %s: %w", addr, lerr))
			} else {
				o.Listener = ln
				r.httpAddr = ln.Addr().String()
			}
		}
		o.Ready = r.Ready
		if o.Listener != nil {
			err = errors.Join(err, start("ingress", o.Instance, "ingress", func(ctx context.Context, c *service.Conn) error {
				// A connection to a listener nobody serves would be accepted
				// and never answered: close it however the ingress ends.
				defer o.Listener.Close()
				return ingresscmd.Run(ctx, c, o, log.With("service", "ingress"))
			}))
		}
	}
	if err != nil {
		return nil, errors.Join(err, r.Stop())
	}
	return r, nil
}

// HTTPAddr returns the ingress listen address, "" without ingress.
func (r *Running) HTTPAddr() string { return r.httpAddr }

// Done is closed when a service failed; the others are then stopping and
// [Running.Stop] returns the failures.
func (r *Running) Done() <-chan struct{} { return r.done }

// Err returns the services' failures so far, nil while none failed.
func (r *Running) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(r.errs...)
}

// Ready reports nil when no service failed and every worker consumes;
// otherwise an error that names the failed services and the workers still
// starting.
func (r *Running) Ready(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) > 0 {
		return fmt.Errorf("a service is down: %w", errors.Join(r.errs...))
	}
	if len(r.starting) > 0 {
		labels := slices.Sorted(maps.Keys(r.starting))
		return fmt.Errorf("still starting: %s", strings.Join(labels, ", "))
	}
	return nil
}

// Stop drains every service (each finishes or hands back its work within
// its grace period), then drains their connections, and returns the
// services' failures.
func (r *Running) Stop() error {
	r.cancel()
	r.wg.Wait()
	for _, c := range r.conns {
		c.Close()
	}
	return r.Err()
}

// WaitRecorded waits until the recorder has taken and acknowledged every
// lifecycle event published so far (its consumer has nothing pending), or
// ctx ends: [recorder.WaitCaughtUp] on conn.
func WaitRecorded(ctx context.Context, conn *service.Conn) error {
	return recorder.WaitCaughtUp(ctx, conn.JS, conn.Names)
}
