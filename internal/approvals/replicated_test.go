package approvals

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/pkg/subjects"
)

// TestConcurrentAnswersOnReplicatedBucketAreRefusedAsAnswered:
// with BUB_REPLICAS=3 the approvals bucket is a replicated stream, and a
// replicated stream reports a compare-and-set conflict on a key whose
// previous proposal is still in flight as error code 10164
// ("JSStreamWrongLastSequenceConstantErr"), not 10071. nats.go maps both
// codes to jetstream.ErrKeyRevisionMismatch for Update, but only 10071
// matches jetstream.ErrKeyExists (see the note on ErrKeyExists in
// nats.go/jetstream/errors.go). Store.update (store.go:146) retries only on
// ErrKeyExists, so the interleaving
//
//	answer A: Get (pending, rev r) ...            Update(rev r) -> proposed
//	answer B: Get (pending, rev r) ... Update(rev r) while A is in flight -> 10164
//
// makes B fail with "recording the answer to approval …: wrong last
// sequence" instead of an *AnsweredError. Ingress maps that to 503
// approvals_unavailable instead of 409 already_answered, and the same
// race between a waiting worker's timeout and an answer makes Store.Wait
// return an error instead of the record that won (Wait's
// errors.Is(err, ErrAnswered) never matches). Expected: exactly one
// answer wins and every other one gets ErrAnswered.
func TestConcurrentAnswersOnReplicatedBucketAreRefusedAsAnswered(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	_, js := c.JetStream(t)
	names := subjects.Default()
	if err := natsx.EnsureTopology(t.Context(), js, names, natsx.Topology{MemoryStorage: true, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	s, err := Open(t.Context(), js, names)
	if err != nil {
		t.Fatal(err)
	}
	const rounds, answerers = 10, 16
	var bad []error
	for r := range rounds {
		id := fmt.Sprintf("%032x", r+1)
		if _, _, err := s.Request(t.Context(), pending(id, time.Hour)); err != nil {
			t.Fatal(err)
		}
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			wins  int
			start = make(chan struct{})
		)
		for i := range answerers {
			wg.Go(func() {
				<-start
				_, err := s.Answer(t.Context(), id, i%2 == 0, "", fmt.Sprintf("answerer-%d", i))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins++
				case errors.Is(err, ErrAnswered):
				default:
					bad = append(bad, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if wins != 1 {
			t.Fatalf("round %d: %d answers won, want exactly 1", r, wins)
		}
		if len(bad) > 0 {
			break
		}
	}
	if len(bad) > 0 {
		t.Fatalf("%d losing answers failed with an error that is not ErrAnswered (a CAS conflict on a replicated bucket): %v", len(bad), bad[0])
	}
}
