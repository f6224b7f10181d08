package events_test

import (
	"context"
	"fmt"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/tools"
)

// The refund policy of Bub's events guide: a ToolCallStarted handler denies a call, which
// stops the later handlers, and the emitter reads the decision back.
func ExampleOn() {
	var bus events.Bus
	events.On(&bus, func(_ context.Context, ev *events.ToolCallStarted) error {
		if allowed, _ := ev.State.Get("refunds_allowed"); ev.Call.Tool == "refund_order" && allowed != true {
			ev.Decision = tools.Deny("Refunds require approval.")
		}
		return nil
	})
	events.On(&bus, func(_ context.Context, ev events.AgentEvent) error {
		fmt.Printf("observed %T\n", ev) // skipped: the decision stopped the event
		return nil
	})

	meta := events.Meta{State: bub.NewState(nil), RunID: "run-1", SessionID: "cli:local"}
	ev, err := events.Emit(context.Background(), &bus, &events.ToolCallStarted{Meta: meta, Call: tools.Call{Tool: "refund_order"}})
	if err != nil {
		panic(err)
	}
	fmt.Println(ev.Decision.Action, ev.Decision.Message)
	// Output: deny Refunds require approval.
}

// A custom tape event (OrderReviewed, from Bub's events guide): the handler records it
// on the session's tape through the event's TapeWriter.
func ExampleTapeEvent() {
	type OrderReviewed struct {
		events.TapeMeta
		OrderID string `json:"order_id"`
	}
	var bus events.Bus
	events.On(&bus, func(ctx context.Context, ev *OrderReviewed) error {
		return ev.Tape.AppendEvent(ctx, "order.reviewed", map[string]any{"order_id": ev.OrderID})
	})
	tape := printTape{}
	meta := events.Meta{State: bub.NewState(nil), SessionID: "customer-42"}
	if _, err := events.Emit(context.Background(), &bus, &OrderReviewed{TapeMeta: events.TapeMeta{Meta: meta, Tape: tape}, OrderID: "A123"}); err != nil {
		panic(err)
	}
	// Output: order.reviewed map[order_id:A123]
}

type printTape struct{}

func (printTape) AppendEvent(_ context.Context, name string, data map[string]any) error {
	fmt.Println(name, data)
	return nil
}

// Custom events cross NATS only with a registered, versioned CloudEvent
// type.
func ExampleRegisterType() {
	type OrderReviewed struct {
		events.Meta
		OrderID string `json:"order_id"`
	}
	var reg events.Registry
	if err := events.RegisterType[*OrderReviewed](&reg, "com.example.order.reviewed.v1"); err != nil {
		panic(err)
	}
	codec := events.Codec{Registry: &reg}
	e, err := codec.ToCloudEvent(&OrderReviewed{Meta: events.Meta{SessionID: "customer-42"}, OrderID: "A123"}, events.Attrs{Source: events.Source("worker", "w1")})
	if err != nil {
		panic(err)
	}
	fmt.Println(e.Type(), events.SubjectName(e.Type()), string(e.Data()))
	// Output: com.example.order.reviewed.v1 com.example.order.reviewed {"order_id":"A123"}
}
