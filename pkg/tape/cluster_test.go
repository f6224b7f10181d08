package tape_test

import (
	"testing"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/pkg/tape"
	"github.com/bubbus/bub/pkg/tape/tapetest"
)

// TestReadsOnThreeNodeCluster: on a 3-server cluster with an R3 tape
// stream, 200 tape reads through connections to each of the servers all
// succeed and see every entry, although each read creates a consumer on
// the stream leader and fetches from it through a server that may not
// know of it yet ("no responders" before the reader retried that).
func TestReadsOnThreeNodeCluster(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	names := newNames(t)
	var stores []*tape.JetStreamStore
	for i, srv := range c.Servers {
		_, js := srv.JetStream(t)
		var opts []tape.JetStreamOption
		if i > 0 {
			opts = append(opts, tape.WithoutProvisioning())
		}
		s, err := tape.NewJetStreamStore(t.Context(), js, names, append(opts, tape.WithReplicas(3))...)
		if err != nil {
			t.Fatalf("store through n%d: %v", i+1, err)
		}
		stores = append(stores, s)
	}
	const entries = 100 // an anchor 50 back: reads of 49 messages go through a consumer
	if err := tapetest.FillBenchTape(t.Context(), stores[0], "cluster", entries, nil); err != nil {
		t.Fatal(err)
	}
	want, err := tape.New(stores[0], "cluster", tape.Context{}).ReadMessages(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 {
		t.Fatal("the filled tape reads as empty")
	}
	for i := range 200 {
		s := stores[i%len(stores)]
		got, err := tape.New(s, "cluster", tape.Context{}).ReadMessages(t.Context())
		if err != nil {
			t.Fatalf("read %d through n%d: %v", i, i%len(stores)+1, err)
		}
		if len(got) != len(want) {
			t.Fatalf("read %d through n%d: %d messages, want %d", i, i%len(stores)+1, len(got), len(want))
		}
	}
}
