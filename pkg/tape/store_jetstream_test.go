package tape_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/pkg/subjects"
	"github.com/bubbus/bub/pkg/tape"
	"github.com/bubbus/bub/pkg/tape/tapetest"
)

// prefixes hands every store of a test run its own deployment prefix, so
// stores can share one server without sharing a stream.
var prefixes atomic.Int64

func newNames(t testing.TB) subjects.Names {
	t.Helper()
	names, err := subjects.New(fmt.Sprintf("t%d", prefixes.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func TestJetStreamStoreConformance(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.JetStream(t)
	tapetest.Run(t, func(t *testing.T) tape.Store {
		s, err := tape.NewJetStreamStore(t.Context(), js, newNames(t))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
