package tape

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/pkg/subjects"
)

// migrateIdle bounds each wait of [MigrateIndexBucket] for its watch.
const migrateIdle = 10 * time.Second

// MigrateIndexBucket copies the tape indexes that earlier versions kept
// in the KV bucket names.TapeIndexBucket() to their subjects
// names.TapeIndex(tape) of the tapes stream, which must exist, and then
// deletes the bucket. An index already on the stream is kept (the copy
// expects an empty subject), so running it again, or two processes at
// once, copies each index once. It returns how many it copied: 0 without
// the bucket. Every process that reads or writes tapes must run this
// version once it ran: an earlier recorder would write the bucket. A
// watch that delivers nothing for migrateIdle fails with
// context.DeadlineExceeded (transient, see jsretry.Transient), so a
// watch lost in a leader election is retried instead of waited on.
func MigrateIndexBucket(ctx context.Context, js jetstream.JetStream, names subjects.Names) (int, error) {
	kv, err := js.KeyValue(ctx, names.TapeIndexBucket())
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("migrating tape indexes: %w", err)
	}
	// One watch delivers every index, as a get per key would.
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return 0, fmt.Errorf("migrating tape indexes: %w", err)
	}
	defer w.Stop()
	source := storeSource(js)
	idle := time.NewTimer(migrateIdle)
	defer idle.Stop()
	n := 0
	for {
		var e jetstream.KeyValueEntry
		var open bool
		idle.Reset(migrateIdle)
		select {
		case e, open = <-w.Updates():
		case <-idle.C:
			return n, fmt.Errorf("migrating tape indexes: the watch of %s delivered nothing for %s: %w", names.TapeIndexBucket(), migrateIdle, context.DeadlineExceeded)
		case <-ctx.Done():
			return n, fmt.Errorf("migrating tape indexes: %w", ctx.Err())
		}
		if !open {
			// Another process migrated and deleted the bucket meanwhile,
			// or the connection closed.
			if _, err := js.KeyValue(ctx, names.TapeIndexBucket()); !errors.Is(err, jetstream.ErrBucketNotFound) {
				return n, fmt.Errorf("migrating tape indexes: the watch of %s ended early (%v)", names.TapeIndexBucket(), err)
			}
			return n, nil
		}
		if e == nil {
			break // every index read
		}
		var ix Index
		if err := json.Unmarshal(e.Value(), &ix); err != nil || ix.Tape == "" {
			return n, fmt.Errorf("migrating tape index %s: not an index: %v", e.Key(), err)
		}
		ack, err := js.PublishMsg(ctx, indexMessage(names, source, ix, 0, 0, subjects.Token(ix.Tape)+":index:migrated:0"))
		if isWrongLastSeq(err) || err == nil && ack.Duplicate {
			continue // on the stream already
		}
		if err != nil {
			return n, fmt.Errorf("migrating tape index %s: %w", e.Key(), err)
		}
		n++
	}
	if err := js.DeleteKeyValue(ctx, names.TapeIndexBucket()); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
		return n, fmt.Errorf("migrating tape indexes: deleting the bucket: %w", err)
	}
	return n, nil
}
