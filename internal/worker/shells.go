package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/pkg/subjects"
	"github.com/bubbus/bub/pkg/tools/toolkit"
)

// shellCallTimeout bounds a routed bash.output or bash.kill: a kill waits
// up to 3s for SIGTERM and 1s for the output to drain.
const shellCallTimeout = 10 * time.Second

// shellRouter is the worker's [toolkit.ShellRouter]: the state bucket maps
// each background shell id to the worker instance that started it (key
// [subjects.Names.ShellOwnerKey]), and each worker answers bash.output and
// bash.kill of its own shells on bub.worker.<instance>.shell.
type shellRouter struct {
	nc       *nats.Conn
	kv       jetstream.KeyValue
	names    subjects.Names
	instance string
	log      *slog.Logger

	shells *toolkit.Shells // set before serve
	sub    *nats.Subscription
	wg     sync.WaitGroup // calls being answered
}

// shellRequest is a routed call: bub.worker.<instance>.shell's request.
type shellRequest struct {
	Op   string         `json:"op"`
	Args map[string]any `json:"args"`
}

// shellReply is the answer to a [shellRequest]: the tool's text, or its
// error message.
type shellReply struct {
	Text  string `json:"text,omitempty"`
	Error string `json:"error,omitempty"`
}

// decodeShellRequest decodes a routed call; bad input is an error.
func decodeShellRequest(b []byte) (shellRequest, error) {
	var req shellRequest
	if err := json.Unmarshal(b, &req); err != nil {
		return shellRequest{}, fmt.Errorf("shell request: %w", err)
	}
	if req.Op != toolkit.ShellOutput && req.Op != toolkit.ShellKill {
		return shellRequest{}, fmt.Errorf("shell request: unknown op %q", req.Op)
	}
	if id, _ := req.Args["shell_id"].(string); id == "" {
		return shellRequest{}, errors.New("shell request: no shell_id")
	}
	return req, nil
}

// Claim implements toolkit.ShellRouter.
func (r *shellRouter) Claim(ctx context.Context, id string) error {
	_, err := r.kv.Put(ctx, r.names.ShellOwnerKey(id), []byte(r.instance))
	return err
}

// Release implements toolkit.ShellRouter.
func (r *shellRouter) Release(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(ctx, shellCallTimeout)
	defer cancel()
	if err := r.kv.Delete(ctx, r.names.ShellOwnerKey(id)); err != nil {
		r.log.Warn("worker.shell_release_failed", "shell", id, "err", err)
	}
}

// Route implements toolkit.ShellRouter.
func (r *shellRouter) Route(ctx context.Context, op string, args map[string]any) (string, bool, error) {
	id, _ := args["shell_id"].(string)
	if id == "" {
		return "", false, nil
	}
	e, err := r.kv.Get(ctx, r.names.ShellOwnerKey(id))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return "", false, nil
	case err != nil:
		return "", true, fmt.Errorf("looking up the worker of shell %s: %w", id, err)
	}
	owner := string(e.Value())
	if owner == r.instance {
		return "", false, nil // ours, and already gone: the local "unknown shell id"
	}
	body, _ := json.Marshal(shellRequest{Op: op, Args: args})
	ctx, cancel := context.WithTimeout(ctx, shellCallTimeout)
	defer cancel()
	msg, err := r.nc.RequestWithContext(ctx, r.names.WorkerShells(owner), body)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return "", true, fmt.Errorf("shell %s belongs to worker %s, which is not running", id, owner)
	case errors.Is(err, context.DeadlineExceeded):
		return "", true, fmt.Errorf("shell %s belongs to worker %s, which did not answer within %s", id, owner, shellCallTimeout)
	case err != nil:
		return "", true, fmt.Errorf("shell %s belongs to worker %s: %w", id, owner, err)
	}
	var rep shellReply
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		return "", true, fmt.Errorf("shell %s: worker %s answered malformed JSON: %w", id, owner, err)
	}
	if rep.Error != "" {
		return "", true, errors.New(rep.Error)
	}
	return rep.Text, true, nil
}

// serve answers routed calls for this worker's shells.
func (r *shellRouter) serve() error {
	sub, err := r.nc.Subscribe(r.names.WorkerShells(r.instance), func(m *nats.Msg) {
		r.wg.Go(func() { r.answer(m) })
	})
	if err != nil {
		return fmt.Errorf("serving shell calls: %w", err)
	}
	r.sub = sub
	return nil
}

func (r *shellRouter) answer(m *nats.Msg) {
	var rep shellReply
	req, err := decodeShellRequest(m.Data)
	if err == nil {
		rep.Text, err = r.shells.Local(req.Op, req.Args)
	}
	if err != nil {
		rep.Error = err.Error()
	}
	b, _ := json.Marshal(rep)
	if err := m.Respond(b); err != nil {
		r.log.Warn("worker.shell_reply_failed", "err", err)
	}
}

// close stops answering and waits for the calls being answered: the
// subscription is drained, so the calls NATS already delivered to it are
// answered too (unsubscribed, it would drop them and leave their callers
// to time out), and no call is added once the wait begins.
func (r *shellRouter) close() error {
	if r.sub == nil {
		return nil
	}
	closed := r.sub.StatusChanged(nats.SubscriptionClosed)
	err := r.sub.Drain()
	if err == nil {
		<-closed
	}
	r.wg.Wait()
	return err
}
