package tape

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/pkg/subjects"
)

// MigrateIndexBucket copies the tape indexes that earlier versions kept
// in the KV bucket names.TapeIndexBucket() to their subjects
// names.TapeIndex(tape) of the tapes stream, which must exist, and then
// deletes the bucket. An index already on the stream is kept (the copy
// expects an empty subject), so running it again, or two processes at
// once, copies each index once. It returns how many it copied: 0 without
// the bucket. Every process that reads or writes tapes must run this
// version once it ran: an earlier recorder would write the bucket.
func MigrateIndexBucket(ctx context.Context, js jetstream.JetStream, names subjects.Names) (int, error) {
	kv, err := js.KeyValue(ctx, names.TapeIndexBucket())
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("migrating tape indexes: %w", err)
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrating tape indexes: %w", err)
	}
	source := storeSource(js)
	n := 0
	for key := range keys.Keys() {
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // another process migrated and deleted it
		}
		if err != nil {
			return n, fmt.Errorf("migrating tape index %s: %w", key, err)
		}
		var ix Index
		if err := json.Unmarshal(e.Value(), &ix); err != nil || ix.Tape == "" {
			return n, fmt.Errorf("migrating tape index %s: not an index: %v", key, err)
		}
		id := subjects.Token(ix.Tape) + ":index:migrated:0"
		m := &nats.Msg{Subject: names.TapeIndex(ix.Tape), Data: appendIndexMessage(nil, entryMessage{id: id, source: source, session: ix.Tape}, ix, 0), Header: messageHeader(id)}
		_, err = js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(0))
		if isAPIError(err, jetstream.JSErrCodeStreamWrongLastSequence) {
			continue // on the stream already
		}
		if err != nil {
			return n, fmt.Errorf("migrating tape index %s: %w", key, err)
		}
		n++
	}
	if err := js.DeleteKeyValue(ctx, names.TapeIndexBucket()); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
		return n, fmt.Errorf("migrating tape indexes: deleting the bucket: %w", err)
	}
	return n, nil
}
