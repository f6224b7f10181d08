package jsretry_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/pkg/jsretry"
)

// followed collects what Follow hands over.
type followed struct {
	mu   sync.Mutex
	data []string
}

func (f *followed) handle(m jetstream.Msg, _ uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.data = append(f.data, string(m.Data()))
}

// waitFor waits up to limit until exactly want was handed over, in order.
func (f *followed) waitFor(t *testing.T, limit time.Duration, want ...string) {
	t.Helper()
	natstest.Eventually(t, limit, func() (bool, string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		return slices.Equal(f.data, want), fmt.Sprintf("handed over %q, want %q", f.data, want)
	})
}

// publish stores msgs on subject s.x, each retried through an election
// under its own message id.
func publish(t *testing.T, js jetstream.JetStream, msgs ...string) {
	t.Helper()
	for _, m := range msgs {
		if err := jsretry.Read(t.Context(), func(ctx context.Context) error {
			_, err := js.Publish(ctx, "s.x", []byte(m), jetstream.WithMsgID(m))
			return err
		}); err != nil {
			t.Fatalf("publishing %s: %v", m, err)
		}
	}
}

// followerConsumer returns the one consumer on stream S.
func followerConsumer(t *testing.T, js jetstream.JetStream) *jetstream.ConsumerInfo {
	t.Helper()
	st, err := js.Stream(t.Context(), "S")
	if err != nil {
		t.Fatal(err)
	}
	var infos []*jetstream.ConsumerInfo
	l := st.ListConsumers(t.Context())
	for ci := range l.Info() {
		infos = append(infos, ci)
	}
	if len(infos) != 1 {
		t.Fatalf("%d consumers on S, want the follower's one", len(infos))
	}
	return infos[0]
}

// TestFollowSurvivesItsConsumer: Follow hands over every message from its
// start sequence in order, once each, across its consumer being deleted
// under it and the server restarting (an in-memory consumer does not
// survive that).
func TestFollowSurvivesItsConsumer(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.JetStream(t, natstest.Reconnecting...)
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	publish(t, js, "m1", "m2")
	var got followed
	stop, err := jsretry.Follow(t.Context(), js, "S", "s.>", 2, got.handle, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	publish(t, js, "m3")
	got.waitFor(t, 5*time.Second, "m2", "m3")

	if err := js.DeleteConsumer(t.Context(), "S", followerConsumer(t, js).Name); err != nil {
		t.Fatal(err)
	}
	publish(t, js, "m4")
	got.waitFor(t, 10*time.Second, "m2", "m3", "m4")

	s.Restart(t)
	publish(t, js, "m5")
	got.waitFor(t, 20*time.Second, "m2", "m3", "m4", "m5")
}

// TestFollowOnAClusterLosingItsConsumersServer: on a 3-server cluster
// with an R3 stream, the server holding Follow's consumer dies; Follow
// makes its consumer again on another and hands over what was published
// meanwhile and after, in order, once each. It logs how long the first
// message published after the loss took to arrive.
func TestFollowOnAClusterLosingItsConsumersServer(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	_, js := c.JetStream(t, natstest.Reconnecting...)
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	var got followed
	stop, err := jsretry.Follow(t.Context(), js, "S", "s.>", 1, got.handle, func(err error) { t.Logf("follow: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	publish(t, js, "m1")
	got.waitFor(t, 5*time.Second, "m1")
	host := followerConsumer(t, js).Cluster.Leader
	for _, s := range c.Servers {
		if s.Name() == host {
			s.Shutdown()
		}
	}
	lost := time.Now()
	publish(t, js, "m2")
	got.waitFor(t, time.Minute, "m1", "m2")
	t.Logf("the consumer's server %s died; the next message came %s later", host, time.Since(lost).Round(100*time.Millisecond))
	publish(t, js, "m3")
	got.waitFor(t, 10*time.Second, "m1", "m2", "m3")
}
