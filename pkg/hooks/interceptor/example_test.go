package interceptor_test

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/hooks/interceptor"
	"github.com/bubbus/bub/pkg/hooks/remote"
	"github.com/bubbus/bub/pkg/subjects"
	"github.com/bubbus/bub/pkg/tools"
)

// noShell denies the bash tool.
type noShell struct{}

func (noShell) Name() string { return "no-shell" }

func (noShell) BeforeToolCall(_ context.Context, in hooks.BeforeToolCallInput) (*tools.Decision, error) {
	if in.Call.Tool == "bash" {
		return tools.Deny("shell commands are not allowed here"), nil
	}
	return nil, nil
}

// Serve a plugin as an interceptor service, then call it from a worker's
// side through a remote plugin, as if it ran in another process.
func ExampleServe() {
	ns, err := server.NewServer(&server.Options{DontListen: true})
	if err != nil {
		panic(err)
	}
	ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(5 * time.Second) {
		panic("nats-server not ready")
	}
	connect := func() *nats.Conn {
		nc, err := nats.Connect("", nats.InProcessServer(ns))
		if err != nil {
			panic(err)
		}
		return nc
	}
	ctx, names := context.Background(), subjects.Default()

	// The interceptor process.
	svcConn := connect()
	defer svcConn.Close()
	svc, err := interceptor.Serve(ctx, svcConn, names, noShell{})
	if err != nil {
		panic(err)
	}
	defer svc.Stop(ctx)

	// The worker process.
	workerConn := connect()
	defer workerConn.Close()
	p, err := remote.New(workerConn, names, remote.Config{Service: "no-shell", Failure: remote.FailClosed}, nil)
	if err != nil {
		panic(err)
	}
	if err := p.Start(ctx); err != nil {
		panic(err)
	}
	reg := hooks.New[struct{}, struct{}]()
	reg.MustRegister(p)
	_, d, err := reg.BeforeToolCall(ctx, hooks.BeforeToolCallInput{Call: tools.Call{Tool: "bash"}})
	if err != nil {
		panic(err)
	}
	fmt.Println(d.Action, d.Message)
	fmt.Print(reg.Report())
	// Output:
	// deny shell commands are not allowed here
	// before_tool_call [chained, in run order; a decision stops the chain; failures isolated]: no-shell (remote: no-shell: 1 instance, timeout 2s, fail-closed)
}
