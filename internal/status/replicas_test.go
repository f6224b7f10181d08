package status_test

import (
	"slices"
	"testing"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/internal/status"
	"github.com/bubbus/bub/pkg/subjects"
)

// TestStatusShowsReplicas: on a 3-server cluster with R3 streams, the
// status of every stream and of every KV bucket's stream (a replica of a
// bucket catches up on its own) names its replicas, its leader and the
// two followers with their lag.
func TestStatusShowsReplicas(t *testing.T) {
	nc, js := natstest.StartCluster(t, 3).JetStream(t)
	n := subjects.Default()
	if err := natsx.EnsureTopology(t.Context(), js, n, natsx.Topology{Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	st := status.Collect(t.Context(), nc, js, n)
	var got []string
	for _, s := range st.Streams {
		got = append(got, s.Name)
	}
	want := []string{n.InboundStream(), n.EventsStream(), n.OutboundStream(), n.TapesStream(), n.SteerStream(), n.DLQStream(),
		n.KVStream(n.StateBucket()), n.KVStream(n.TurnsBucket()), n.KVStream(n.ApprovalsBucket()), n.KVStream(n.DeliveredBucket())}
	if !slices.Equal(got, want) {
		t.Fatalf("streams %v, want %v (errors %v)", got, want, st.Errors)
	}
	servers := []string{"n1", "n2", "n3"}
	for _, s := range st.Streams {
		if s.Replicas != 3 || !slices.Contains(servers, s.Leader) || len(s.Followers) != 2 {
			t.Errorf("stream %s: replicas %d, leader %q, followers %+v", s.Name, s.Replicas, s.Leader, s.Followers)
			continue
		}
		for _, f := range s.Followers {
			if f.Name == s.Leader || !slices.Contains(servers, f.Name) {
				t.Errorf("stream %s: follower %+v of leader %s", s.Name, f, s.Leader)
			}
		}
	}
}
