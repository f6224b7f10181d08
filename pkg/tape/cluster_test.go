package tape_test

import (
	"testing"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/pkg/tape"
	"github.com/bubbus/bub/pkg/tape/tapetest"
)

// TestReadsOnThreeNodeCluster: on a 3-server cluster with an R3 tape
// stream, 200 tape reads through connections to each of the servers all
// succeed and see every entry. Reads are direct gets that any replica
// answers; a reader that meets a lagging one reads the rest through a
// consumer (and from the leader when that falls short too), which it may
// fetch from through a server that does not know of it yet ("no
// responders" before the reader retried that). Then a writer reads its own appends back at once, 100 times,
// while the followers may not have them yet: every read sees every
// committed entry.
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
	for i := range 100 {
		if _, err := stores[0].Append(t.Context(), "own", []tape.Entry{tape.Event("e", nil)}); err != nil {
			t.Fatal(err)
		}
		got, err := stores[0].Fetch(t.Context(), "own", tape.All())
		if err != nil || len(got) != i+1 {
			t.Fatalf("read after append %d: %d entries, %v", i+1, len(got), err)
		}
	}
}

// TestJetStreamStoreConformanceOnACluster: the conformance suite on a
// 3-server cluster with an R3 tape stream, where an append is one atomic
// batch (on one server it is a checked chain: TestJetStreamStoreConformance).
func TestJetStreamStoreConformanceOnACluster(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	_, js := c.Servers[1].JetStream(t)
	tapetest.Run(t, func(t *testing.T) tape.Store {
		s, err := tape.NewJetStreamStore(t.Context(), js, newNames(t), tape.WithReplicas(3))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
