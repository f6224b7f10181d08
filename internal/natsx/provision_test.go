package natsx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/pkg/subjects"
	"github.com/bubbus/bub/pkg/tape"
)

// testCtx is t's context, ended after two minutes: a test waiting on a
// JetStream call that never answers fails with its name instead of
// holding the package until go test's timeout.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func streamNames(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	var names []string
	l := js.StreamNames(testCtx(t))
	for n := range l.Name() {
		names = append(names, n)
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

// TestApplyCheckNamesTheFirstMissingStream: with provisioning off an
// empty server fails with an error naming the inbound stream (the first
// of the topology) and creates nothing; a dry run creates nothing either
// and lists every resource as to be created.
func TestApplyCheckNamesTheFirstMissingStream(t *testing.T) {
	_, js := natstest.Start(t).JetStream(t)
	n := subjects.Default()
	_, err := Apply(testCtx(t), js, n, Topology{NoProvision: true}, Check, nil)
	if !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), "stream BUB_INBOUND is missing") {
		t.Fatalf("check on an empty server: %v", err)
	}
	if !strings.Contains(err.Error(), "stream BUB_TAPES is missing") || !strings.Contains(err.Error(), "bucket bub_delivered is missing") || !strings.Contains(err.Error(), "consumer workers on stream BUB_INBOUND is missing") {
		t.Errorf("the error does not name every missing resource: %v", err)
	}
	changes, err := Apply(testCtx(t), js, n, Topology{}, DryRun, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 6+4+2 {
		t.Errorf("dry run lists %d resources, want 6 streams, 4 buckets, 2 consumers: %v", len(changes), changes)
	}
	for _, c := range changes {
		if c.Action != ActionCreate {
			t.Errorf("dry run on an empty server: %s", c)
		}
	}
	if got := streamNames(t, js); len(got) != 0 {
		t.Errorf("check and dry run created streams %v", got)
	}
}

// TestApplyUpdatesWhatDiffersWithOneLogLine: provisioning updates a
// stream whose settings differ, logging the stream and the change from →
// to, and leaves the rest alone; a dry run reports the update without
// making it; Check accepts tuned limits but names an incompatible
// setting.
func TestApplyUpdatesWhatDiffersWithOneLogLine(t *testing.T) {
	js, n := provisioned(t)
	ctx := testCtx(t)
	if _, err := Apply(ctx, js, n, Topology{}, Check, nil); err != nil {
		t.Fatalf("check after provisioning: %v", err)
	}
	events, err := js.Stream(ctx, "BUB_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	tuned := events.CachedInfo().Config
	tuned.MaxAge = time.Hour // an operator's limit: compatible
	if _, err := js.UpdateStream(ctx, tuned); err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(ctx, js, n, Topology{}, Check, nil); err != nil {
		t.Errorf("check rejects a tuned limit: %v", err)
	}
	tuned.Duplicates = time.Minute // dedupe window: incompatible
	if _, err := js.UpdateStream(ctx, tuned); err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(ctx, js, n, Topology{}, Check, nil); err == nil || !strings.Contains(err.Error(), "stream BUB_EVENTS differs: duplicate_window 1m0s → 2m0s") {
		t.Errorf("check of a changed dedupe window: %v", err)
	}
	changes, err := Apply(ctx, js, n, Topology{}, DryRun, nil)
	if err != nil {
		t.Fatal(err)
	}
	if changes[1].Name != "BUB_EVENTS" || changes[1].Action != ActionUpdate {
		t.Errorf("dry run: %v", changes[1])
	}
	if got := mustStream(t, js, "BUB_EVENTS"); got.Duplicates != time.Minute {
		t.Errorf("dry run changed the stream: duplicates %v", got.Duplicates)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	if _, err := Apply(ctx, js, n, Topology{}, Provision, log); err != nil {
		t.Fatal(err)
	}
	got := mustStream(t, js, "BUB_EVENTS")
	if got.Duplicates != 2*time.Minute || got.MaxAge != 7*24*time.Hour {
		t.Errorf("not updated: duplicates %v, max age %v", got.Duplicates, got.MaxAge)
	}
	want := `msg=natsx.stream_updated stream=BUB_EVENTS changes="duplicate_window 1m0s → 2m0s, max_age 1h0m0s → 168h0m0s"`
	if lines := strings.Split(strings.TrimSpace(logs.String()), "\n"); len(lines) != 1 || !strings.Contains(lines[0], want) {
		t.Errorf("log:\n%s\nwant one line with %s", logs.String(), want)
	}
}

// provisioned is a new server with the default topology provisioned.
func provisioned(t *testing.T) (jetstream.JetStream, subjects.Names) {
	t.Helper()
	_, js := natstest.Start(t).JetStream(t)
	n := subjects.Default()
	if err := EnsureTopology(testCtx(t), js, n, Topology{}); err != nil {
		t.Fatal(err)
	}
	return js, n
}

func mustStream(t *testing.T, js jetstream.JetStream, name string) jetstream.StreamConfig {
	t.Helper()
	s, err := js.Stream(testCtx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	return s.CachedInfo().Config
}

// TestApplyReplicasAndPlacement: every stream, bucket and shared
// consumer gets the topology's replicas and placement (a single server
// holds R1; its cluster placement is the server's own name-less cluster,
// so the placement is checked on the wanted configurations), and
// replicas other than 1, 3 or 5 are refused.
func TestApplyReplicasAndPlacement(t *testing.T) {
	_, js := natstest.Start(t).JetStream(t)
	n := subjects.Default()
	p := &jetstream.Placement{Tags: []string{"ssd"}}
	topo := Topology{Replicas: 3, Placement: p}
	for _, sc := range topo.AllStreams(n) {
		if sc.Replicas != 3 || sc.Placement != p {
			t.Errorf("stream %s: replicas %d placement %v", sc.Name, sc.Replicas, sc.Placement)
		}
	}
	for _, kc := range topo.AllBuckets(n) {
		if kc.Replicas != 3 || kc.Placement != p {
			t.Errorf("bucket %s: replicas %d placement %v", kc.Bucket, kc.Replicas, kc.Placement)
		}
	}
	for _, cc := range []jetstream.ConsumerConfig{topo.WorkerConsumer(n), topo.RecorderConsumer(n), topo.GatewayConsumer(n, "telegram")} {
		if cc.Replicas != 3 {
			t.Errorf("consumer %s: replicas %d", cc.Durable, cc.Replicas)
		}
	}
	if _, err := Apply(testCtx(t), js, n, Topology{Replicas: 2}, Provision, nil); err == nil || !strings.Contains(err.Error(), "replicas must be 1, 3 or 5") {
		t.Errorf("replicas 2: %v", err)
	}
	if _, err := Apply(testCtx(t), js, n, Topology{Replicas: 3}, Provision, nil); err == nil {
		t.Error("R3 on a single server was accepted")
	}
	if err := EnsureTopology(testCtx(t), js, n, Topology{Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	for _, name := range streamNames(t, js) {
		if r := mustStream(t, js, name).Replicas; r != 1 {
			t.Errorf("stream %s: replicas %d", name, r)
		}
	}
}

// TestConcurrentEnsureTopology: services starting together provision
// the same topology at once; every one of them succeeds (a create that
// loses the race is retried and finds the stream).
func TestConcurrentEnsureTopology(t *testing.T) {
	_, js := natstest.Start(t).JetStream(t)
	n := subjects.Default()
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = EnsureTopology(testCtx(t), js, n, Topology{}) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("ensure %d: %v", i, err)
		}
	}
	if _, err := Apply(testCtx(t), js, n, Topology{}, Check, nil); err != nil {
		t.Error(err)
	}
}

// TestRetry: transient errors are retried and logged until the
// operation succeeds; other errors end it at once; the bound ends it.
func TestRetry(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	calls := 0
	err := Retry(testCtx(t), log, "stream X", func(context.Context) error {
		calls++
		if calls < 3 {
			return &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}
		}
		return nil
	})
	if err != nil || calls != 3 || strings.Count(logs.String(), "msg=natsx.retry what=\"stream X\"") != 2 {
		t.Errorf("err %v after %d calls, log:\n%s", err, calls, logs.String())
	}
	calls = 0
	fatal := &jetstream.APIError{Code: 500, ErrorCode: 10074, Description: "replicas > 1 not supported in non-clustered mode"}
	if err := Retry(testCtx(t), log, "x", func(context.Context) error { calls++; return fatal }); !errors.Is(err, fatal) || calls != 1 {
		t.Errorf("non-transient: err %v after %d calls", err, calls)
	}
	old := EnsureBound
	EnsureBound = 300 * time.Millisecond
	t.Cleanup(func() { EnsureBound = old })
	start := time.Now()
	if err := Retry(testCtx(t), log, "x", func(context.Context) error { return context.DeadlineExceeded }); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 3*time.Second {
		t.Errorf("bounded retry: %v after %v", err, time.Since(start))
	}
}

// TestApplyOnThreeNodeCluster: on a 3-server JetStream cluster, three
// services starting at once and scaling a provisioned R1 topology to R3
// all succeed; every stream, bucket and shared consumer ends at 3
// replicas, the updates are logged "replicas 1 → 3", and a check at R3
// passes. The events stream allows direct gets at R1 only (a worker's
// read-your-writes read must see the newest event, which a follower's
// direct get may not): the scaling turns them off.
func TestApplyOnThreeNodeCluster(t *testing.T) {
	_, js := natstest.StartCluster(t, 3).JetStream(t)
	n := subjects.Default()
	ctx := testCtx(t)
	if err := EnsureTopology(ctx, js, n, Topology{Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	if !mustStream(t, js, n.EventsStream()).AllowDirect {
		t.Error("R1 events stream: direct gets off")
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() { _, errs[i] = Apply(ctx, js, n, Topology{Replicas: 3}, Provision, log) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("service %d: %v", i, err)
		}
	}
	for _, name := range streamNames(t, js) {
		if r := mustStream(t, js, name).Replicas; r != 3 {
			t.Errorf("stream %s: replicas %d", name, r)
		}
	}
	if mustStream(t, js, n.EventsStream()).AllowDirect {
		t.Error("R3 events stream: direct gets on")
	}
	if !strings.Contains(logs.String(), `msg=natsx.stream_updated stream=BUB_EVENTS changes="replicas 1 → 3, allow_direct true → false"`) {
		t.Errorf("events update not logged as such:\n%s", logs.String())
	}
	cons, err := js.Consumer(ctx, "BUB_INBOUND", "workers")
	if err != nil {
		t.Fatal(err)
	}
	if r := cons.CachedInfo().Config.Replicas; r != 3 {
		t.Errorf("worker consumer: replicas %d", r)
	}
	if !strings.Contains(logs.String(), `msg=natsx.stream_updated stream=BUB_INBOUND changes="replicas 1 → 3"`) {
		t.Errorf("no update logged:\n%s", logs.String())
	}
	if _, err := Apply(ctx, js, n, Topology{Replicas: 3}, Check, nil); err != nil {
		t.Error(err)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestApplyUpgradesAnEarlierTapesStream: a tapes stream of an earlier
// version (no index subject, no atomic batches or rollups) and its KV
// index bucket: Check names what differs, Provision updates the stream,
// copies the index to it with one log line and deletes the bucket, and
// the tape reads as before.
func TestApplyUpgradesAnEarlierTapesStream(t *testing.T) {
	js, n := provisioned(t)
	ctx := testCtx(t)
	if err := js.DeleteStream(ctx, n.TapesStream()); err != nil {
		t.Fatal(err)
	}
	old := tape.StreamConfig(n)
	old.Subjects, old.AllowAtomicPublish, old.AllowRollup = []string{n.TapesAll(), n.TapeArchivesAll()}, false, false
	if _, err := js.CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: n.TapeIndexBucket()})
	if err != nil {
		t.Fatal(err)
	}
	ack, err := js.Publish(ctx, n.Tape("s"), []byte(`{"id":1,"kind":"message","payload":{"content":"kept"},"meta":{},"date":"2026-01-02T03:04:05+00:00"}`))
	if err != nil {
		t.Fatal(err)
	}
	index := fmt.Sprintf(`{"tape":"s","seq":%d,"first_seq":%d,"last_id":1,"entries":1,"anchors":0}`, ack.Sequence, ack.Sequence)
	if _, err := kv.Put(ctx, subjects.Token("s"), []byte(index)); err != nil {
		t.Fatal(err)
	}
	_, err = Apply(ctx, js, n, Topology{}, Check, nil)
	if err == nil || !strings.Contains(err.Error(), "stream BUB_TAPES differs: subjects") || !strings.Contains(err.Error(), "allow_atomic false → true, allow_rollup_hdrs false → true") {
		t.Fatalf("check of an earlier tapes stream: %v", err)
	}
	var logs bytes.Buffer
	if _, err := Apply(ctx, js, n, Topology{}, Provision, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "msg=natsx.tape_indexes_migrated indexes=1 from=bub_tape_index to=BUB_TAPES") {
		t.Errorf("logs:\n%s", logs.String())
	}
	if _, err := js.KeyValue(ctx, n.TapeIndexBucket()); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Errorf("the bucket after the upgrade: %v", err)
	}
	if _, err := Apply(ctx, js, n, Topology{}, Check, nil); err != nil {
		t.Errorf("check after the upgrade: %v", err)
	}
	s, err := tape.NewJetStreamStore(ctx, js, n, tape.WithoutProvisioning())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Fetch(ctx, "s", tape.All()); err != nil || len(got) != 1 || got[0].Payload["content"] != "kept" {
		t.Fatalf("the tape after the upgrade: %v, %v", got, err)
	}
}
