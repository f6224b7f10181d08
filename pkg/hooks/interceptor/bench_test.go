package interceptor_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/hooks/interceptor"
	"github.com/bubbus/bub/pkg/subjects"
	"github.com/bubbus/bub/pkg/tools"
)

// ioBound is a before_tool_call plugin that waits 5 ms per call, as an
// audit service writing each call to a database does.
type ioBound struct{}

func (ioBound) Name() string { return "audit" }

func (ioBound) BeforeToolCall(context.Context, hooks.BeforeToolCallInput) (*tools.Decision, error) {
	time.Sleep(5 * time.Millisecond)
	return nil, nil
}

// BenchmarkConcurrency: the calls per second one process serves of an
// I/O-bound plugin, by WithConcurrency, with 16 callers each making 8
// calls per iteration. One instance serves fewer than 200 calls/s (5 ms
// each, one at a time); n instances serve up to n times that, less where
// the queue group hands a call to a busy instance while another is idle.
func BenchmarkConcurrency(b *testing.B) {
	const callers, each = 16, 8
	for _, n := range []int{1, 4, 16} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			s := natstest.Start(b)
			names := subjects.Default()
			svc, err := interceptor.Serve(b.Context(), s.Conn(b), names, ioBound{}, interceptor.WithConcurrency(n))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = svc.Stop(context.Background()) })
			nc := s.Conn(b)
			subj := names.Hook("audit", string(hooks.HookBeforeToolCall))
			body := []byte(`{"hook": "before_tool_call", "input": {}}`)
			for b.Loop() {
				var wg sync.WaitGroup
				for range callers {
					wg.Go(func() {
						for range each {
							if _, err := nc.Request(subj, body, 10*time.Second); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
			}
			b.ReportMetric(float64(b.N*callers*each)/b.Elapsed().Seconds(), "calls/s")
		})
	}
}
