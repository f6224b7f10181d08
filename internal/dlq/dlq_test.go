package dlq_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/dlq"
	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/pkg/subjects"
)

func setup(t *testing.T, topo natsx.Topology) (*nats.Conn, jetstream.JetStream, subjects.Names) {
	t.Helper()
	srv := natstest.Start(t)
	nc, js := srv.JetStream(t)
	names := subjects.Default()
	topo.MemoryStorage = true
	if err := natsx.EnsureTopology(t.Context(), js, names, topo); err != nil {
		t.Fatal(err)
	}
	return nc, js, names
}

func fetchOne(t *testing.T, js jetstream.JetStream, names subjects.Names) jetstream.Msg {
	t.Helper()
	cons, err := js.Consumer(t.Context(), names.InboundStream(), names.WorkerConsumer())
	if err != nil {
		t.Fatal(err)
	}
	b, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range b.Messages() {
		return m
	}
	t.Fatalf("nothing fetched: %v", b.Error())
	return nil
}

func TestRejectListReplay(t *testing.T) {
	_, js, names := setup(t, natsx.Topology{})
	ctx := t.Context()
	in := nats.NewMsg(names.Inbound("http"))
	in.Header.Set("ce-id", "ev-1")
	in.Header.Set(subjects.HeaderMsgID, "ev-1")
	in.Header.Set("X-Custom", "kept")
	in.Data = []byte("garbage")
	if _, err := js.PublishMsg(ctx, in); err != nil {
		t.Fatal(err)
	}
	w := dlq.NewWriter(js, names, nil)
	if err := w.Reject(ctx, fetchOne(t, js, names), dlq.ReasonUndecodable, errors.New("bad bytes")); err != nil {
		t.Fatal(err)
	}
	letters, err := dlq.List(ctx, js, names, "")
	if err != nil || len(letters) != 1 {
		t.Fatalf("list: %v %v", letters, err)
	}
	l := letters[0]
	if l.Reason != dlq.ReasonUndecodable || l.Error != "bad bytes" || l.Subject != names.Inbound("http") || l.EventID != "ev-1" || string(l.Data) != "garbage" || l.Header.Get("X-Custom") != "kept" {
		t.Fatalf("letter %+v", l)
	}
	if l.Header.Get(subjects.HeaderDLQStream) != names.InboundStream() || l.Header.Get(subjects.HeaderDLQSeq) != "1" {
		t.Fatalf("letter %+v does not say where it was stored", l)
	}
	if !l.Matches("ev-1") || !l.Matches("1") || l.Matches("2") {
		t.Fatal("Matches by sequence and event id")
	}
	if other, _ := dlq.List(ctx, js, names, dlq.ReasonMaxDelivered); len(other) != 0 {
		t.Fatalf("reason filter: %v", other)
	}
	if err := dlq.Replay(ctx, js, names, l); err != nil {
		t.Fatal(err)
	}
	if err := dlq.Replay(ctx, js, names, l); err != nil { // a crash before the delete: replayed once
		t.Fatal(err)
	}
	m := fetchOne(t, js, names)
	if string(m.Data()) != "garbage" || m.Headers().Get("X-Custom") != "kept" || m.Headers().Get(subjects.HeaderDLQReason) != "" {
		t.Fatalf("replayed %q %v", m.Data(), m.Headers())
	}
	_ = m.Ack()
	st, _ := js.Stream(ctx, names.InboundStream())
	natstest.Eventually(t, 5*time.Second, func() (bool, string) {
		info, err := st.Info(ctx)
		return err == nil && info.State.Msgs == 0, "replayed twice"
	})
	if left, _ := dlq.List(ctx, js, names, ""); len(left) != 0 {
		t.Fatalf("replayed letter kept: %v", left)
	}
}

// TestMaxDeliveriesAdvisory: a message whose only delivery is never
// acknowledged (its worker died) is dead-lettered by the advisory watcher
// and removed from the inbound stream.
func TestMaxDeliveriesAdvisory(t *testing.T) {
	nc, js, names := setup(t, natsx.Topology{WorkerMaxDeliver: 1, WorkerAckWait: time.Second})
	ctx := t.Context()
	stop, err := dlq.WatchMaxDeliveries(ctx, nc, js, names, names.InboundStream(), names.WorkerConsumer(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	in := nats.NewMsg(names.Inbound("http"))
	in.Header.Set("ce-id", "lost-1")
	in.Data = []byte(`{}`)
	if _, err := js.PublishMsg(ctx, in); err != nil {
		t.Fatal(err)
	}
	_ = fetchOne(t, js, names) // and never acknowledged
	var letters []dlq.Letter
	natstest.Eventually(t, 15*time.Second, func() (bool, string) {
		letters, err = dlq.List(context.Background(), js, names, dlq.ReasonMaxDelivered)
		return err == nil && len(letters) == 1, "no max_delivered letter"
	})
	l := letters[0]
	if l.EventID != "lost-1" || l.Header.Get(subjects.HeaderDLQStream) != names.InboundStream() || l.Header.Get(subjects.HeaderDLQDeliveries) != "1" {
		t.Fatalf("letter %+v", l)
	}
	st, _ := js.Stream(ctx, names.InboundStream())
	natstest.Eventually(t, 5*time.Second, func() (bool, string) {
		info, err := st.Info(ctx)
		return err == nil && info.State.Msgs == 0, "the exhausted message is still in the inbound stream"
	})
}

// TestHoldStoredDeadLettersOnce: two readers that dead-letter the same
// stored message (as two workers draining one session's steering do)
// store one letter, which says where the message is stored.
func TestHoldStoredDeadLettersOnce(t *testing.T) {
	_, js, names := setup(t, natsx.Topology{})
	ctx := t.Context()
	ack, err := js.Publish(ctx, names.Steer("s1"), []byte("garbage"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, names.SteerStream())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := st.GetMsg(ctx, ack.Sequence)
	if err != nil {
		t.Fatal(err)
	}
	w := dlq.NewWriter(js, names, nil)
	for range 2 {
		if err := w.HoldStored(ctx, names.SteerStream(), raw, dlq.ReasonUndecodable, errors.New("bad bytes")); err != nil {
			t.Fatal(err)
		}
	}
	dead, err := js.Stream(ctx, names.DLQStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := dead.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("%d dead letters of one stored message, want 1", info.State.Msgs)
	}
	letter, err := dead.GetLastMsgForSubject(ctx, names.DLQ(dlq.ReasonUndecodable))
	if err != nil {
		t.Fatal(err)
	}
	if got := letter.Header.Get(subjects.HeaderDLQStream) + "/" + letter.Header.Get(subjects.HeaderDLQSeq); got != fmt.Sprintf("%s/%d", names.SteerStream(), ack.Sequence) {
		t.Fatalf("letter from %q", got)
	}
}
