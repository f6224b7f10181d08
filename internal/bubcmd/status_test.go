package bubcmd

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/bubbus/bub/internal/status"
)

// TestPrintStatus: `bub status` renders every part of a collected status
// (internal/status tests the collection against a running cluster).
func TestPrintStatus(t *testing.T) {
	worker := status.ServiceInstance{Service: "worker", Instance: "st-w0", Version: "0.0.0-devel", Started: time.Now().Add(-time.Minute), MaxPayload: 8 << 20}
	st := &status.Status{
		Server: status.Server{URL: "nats://127.0.0.1:4222", Version: "2.15.2", Streams: 6, MaxPayload: 8 << 20},
		Streams: []status.Stream{{Name: "BUB_INBOUND", Messages: 3, Bytes: 2048, Replicas: 3, Leader: "n1",
			Followers: []status.Replica{{Name: "n2", Current: true}, {Name: "n3", Lag: 12}}}},
		Consumers:    []status.Consumer{{Stream: "BUB_INBOUND", Name: "workers", Waiting: 2}},
		Services:     []status.ServiceInstance{{Service: "recorder", Instance: "st-r", Version: "0.0.0-devel", MaxPayload: 1 << 20}, worker},
		Workers:      status.Workers{RunningTurns: map[string]int{"st-w0": 1}, Instances: []status.WorkerInstance{{ServiceInstance: worker, WorkerLoad: status.WorkerLoad{RunningTurns: 1, Concurrency: 8}}}},
		Interceptors: []status.Interceptor{{Service: "audit", Version: "1.0.0", ID: "x1", Hooks: []string{"before_tool_call"}, Requests: 4}},
		Recorder:     &status.Recorder{Lag: 0},
		DeadLetters:  status.DeadLetters{Messages: 2, ByReason: map[string]uint64{"undecodable": 2}},
		Errors:       []string{"turn registry: timeout"},
	}
	var b bytes.Buffer
	printStatus(&b, st)
	for _, want := range []string{"max_payload 8.0 MiB", "STREAMS", "BUB_INBOUND", "2.0 KiB", "REPLICAS", "n1", "n2=0 n3=12(behind)", "CONSUMERS", "workers", "SERVICES", "st-r", "1.0 MiB", "WORKERS", "st-w0", "0.0.0-devel", "running turns (turn registry): 1  st-w0=1",
		"INTERCEPTORS", "audit", "before_tool_call", "RECORDER", "lag: 0 events", "DEAD LETTERS", "undecodable=2", "warning: turn registry: timeout"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status output lacks %q:\n%s", want, b.String())
		}
	}
}
