package status_test

import (
	"slices"
	"testing"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/internal/status"
	"github.com/bubbus/bub/pkg/subjects"
)

// TestStatusShowsReplicas: on a 3-server cluster with R3 streams, every
// stream's status names its replicas, its leader and the two followers
// with their lag.
func TestStatusShowsReplicas(t *testing.T) {
	nc, js := natstest.StartCluster(t, 3).JetStream(t)
	n := subjects.Default()
	if err := natsx.EnsureTopology(t.Context(), js, n, natsx.Topology{Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	st := status.Collect(t.Context(), nc, js, n)
	if len(st.Streams) != 6 {
		t.Fatalf("streams: %+v (errors %v)", st.Streams, st.Errors)
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
