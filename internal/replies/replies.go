package replies

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Ref names one stored outbound envelope.
type Ref struct {
	// Stream is the JetStream stream holding it (BUB_OUTBOUND).
	Stream string `json:"stream"`
	// Seq is its sequence in Stream.
	Seq uint64 `json:"seq"`
}

// Done is the value of a done marker: when the turn of an inbound
// envelope finished and where the replies it sent are, in the order they
// were published. A turn that answered nothing (stopped by ,quit) has
// none.
type Done struct {
	At      time.Time `json:"at"`
	Replies []Ref     `json:"replies"`
}

// Encode returns the marker's JSON.
func (d Done) Encode() ([]byte, error) {
	if d.Replies == nil {
		d.Replies = []Ref{}
	}
	return json.Marshal(d)
}

// Decode parses a done marker written by [Done.Encode]. It rejects
// anything else: unknown fields, trailing data, a missing reply list and
// references without a stream or a sequence.
func Decode(data []byte) (Done, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var d Done
	if err := dec.Decode(&d); err != nil {
		return Done{}, fmt.Errorf("decoding done marker: %w", err)
	}
	if dec.More() {
		return Done{}, errors.New("decoding done marker: trailing data after the object")
	}
	if d.Replies == nil {
		return Done{}, errors.New("decoding done marker: no reply list")
	}
	for i, r := range d.Replies {
		if r.Stream == "" || r.Seq == 0 {
			return Done{}, fmt.Errorf("decoding done marker: reply %d needs a stream and a positive sequence", i)
		}
	}
	return d, nil
}

// collector gathers the references [Record] reports during one turn.
type collector struct {
	mu   sync.Mutex
	refs []Ref
}

type collectorKey struct{}

// Collect returns a context that collects what [Record] reports under it
// (for [Recorded]).
func Collect(ctx context.Context) context.Context {
	return context.WithValue(ctx, collectorKey{}, &collector{})
}

// Record adds ref to the collection of ctx, once; without one (an
// outbound envelope sent outside a gated turn) it does nothing.
func Record(ctx context.Context, ref Ref) {
	c, _ := ctx.Value(collectorKey{}).(*collector)
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Contains(c.refs, ref) {
		c.refs = append(c.refs, ref)
	}
}

// Recorded returns what was recorded under ctx so far, in order.
func Recorded(ctx context.Context) []Ref {
	c, _ := ctx.Value(collectorKey{}).(*collector)
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.refs)
}
