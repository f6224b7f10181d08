package worker

import (
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/bubbus/bub/internal/status"
)

// ServeHooks answers hook report requests ([status.AskHooks]) on
// [subjects.Names.WorkerHooks], in the queue group of every worker, with
// this runtime's hook report as the worker instance. Stop answering with
// the returned function.
func (rt *Runtime) ServeHooks() (stop func() error, err error) {
	sub, err := rt.o.NC.QueueSubscribe(rt.o.Names.WorkerHooks(), rt.o.Names.HookReporters(), func(m *nats.Msg) {
		b, err := json.Marshal(status.NewHooksReport(rt.o.Instance, rt.reg.Report()))
		if err == nil {
			err = m.Respond(b)
		}
		if err != nil {
			rt.log.Warn("worker.hooks_reply_failed", "err", err)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("serving the hook report: %w", err)
	}
	return sub.Unsubscribe, nil
}
