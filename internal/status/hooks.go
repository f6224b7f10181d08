package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/subjects"
)

// HooksReport is a worker's hook report, the data `bub hooks` prints: every
// hook with at least one implementation, each with its implementations in
// the order they run. A worker answers [AskHooks] with it on
// [subjects.Names.WorkerHooks] (internal/worker, Runtime.ServeHooks).
type HooksReport struct {
	// Instance names the worker that answered.
	Instance string `json:"instance"`
	Hooks    []Hook `json:"hooks"`
}

// Hook is one hook of a [HooksReport] and how its implementations are
// called.
type Hook struct {
	Hook     hooks.Hook  `json:"hook"`
	Kind     hooks.Kind  `json:"kind"`
	Phase    hooks.Phase `json:"phase"`
	Order    hooks.Order `json:"order"`
	Isolated bool        `json:"isolated"`
	// Impls are the implementations in run order; the first of a
	// firstresult hook is asked first.
	Impls []HookImpl `json:"impls"`
}

// HookImpl is one implementation of a hook: the plugin and, for a remote
// interceptor, its service and details.
type HookImpl struct {
	Plugin string `json:"plugin"`
	hooks.Description
}

// NewHooksReport returns the report of rep for the worker instance.
func NewHooksReport(instance string, rep hooks.Report) HooksReport {
	out := HooksReport{Instance: instance, Hooks: make([]Hook, 0, len(rep))}
	for _, h := range rep {
		hk := Hook{Hook: h.Hook, Kind: h.Kind, Phase: h.Phase, Order: h.Order, Isolated: h.Isolated}
		for _, im := range h.Impls {
			hk.Impls = append(hk.Impls, HookImpl{Plugin: im.Plugin, Description: im.Description})
		}
		out.Hooks = append(out.Hooks, hk)
	}
	return out
}

// ErrNoWorker is returned by [AskHooks] when no worker is running to
// answer.
var ErrNoWorker = errors.New("no worker is running to report its hooks")

// AskHooks requests a hook report from one of the running workers (ctx
// bounds the wait).
func AskHooks(ctx context.Context, nc *nats.Conn, names subjects.Names) (HooksReport, error) {
	msg, err := nc.RequestWithContext(ctx, names.WorkerHooks(), nil)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return HooksReport{}, ErrNoWorker
	case err != nil:
		return HooksReport{}, fmt.Errorf("asking a worker for its hooks: %w", err)
	}
	var rep HooksReport
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		return HooksReport{}, fmt.Errorf("decoding a worker's hook report: %w", err)
	}
	return rep, nil
}
