package natsx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/pkg/jsretry"
	"github.com/bubbus/bub/pkg/subjects"
	"github.com/bubbus/bub/pkg/tape"
)

// Mode says what [Apply] does with the topology.
type Mode int

const (
	// Provision creates what is missing and updates what differs.
	Provision Mode = iota
	// Check changes nothing and fails, naming every stream, bucket or
	// consumer that is missing or has incompatible settings (operator
	// mode, BUB_PROVISION=false).
	Check
	// DryRun changes nothing and reports what Provision would do.
	DryRun
)

// Actions of a [Change].
const (
	ActionCreate    = "create"
	ActionUpdate    = "update"
	ActionUnchanged = "unchanged"
)

// Change is one stream, bucket or consumer of the topology and what
// [Apply] did (Provision) or would do (DryRun) to it.
type Change struct {
	// Kind is stream, bucket or consumer.
	Kind string `json:"kind"`
	// Name is the stream's, bucket's or durable consumer's name.
	Name string `json:"name"`
	// Stream is the stream of a consumer.
	Stream string `json:"stream,omitempty"`
	// Action is create, update or unchanged.
	Action string `json:"action"`
	// Diff lists the settings an update changes, "replicas 1 → 3".
	Diff []string `json:"diff,omitempty"`
	// Config is the wanted configuration (a jetstream.StreamConfig,
	// KeyValueConfig or ConsumerConfig).
	Config any `json:"config"`
}

// String is the change on one line.
func (c Change) String() string {
	s := c.Action + " " + c.Kind + " " + c.Name
	if c.Stream != "" {
		s += " on " + c.Stream
	}
	if len(c.Diff) > 0 {
		s += ": " + strings.Join(c.Diff, ", ")
	}
	return s
}

// ErrIncompatible is wrapped by the error of [Check] when the topology
// is missing or differs.
var ErrIncompatible = errors.New("topology is not provisioned")

// EnsureTopology provisions the topology silently (see [Apply]).
func EnsureTopology(ctx context.Context, js jetstream.JetStream, n subjects.Names, t Topology) error {
	_, err := Apply(ctx, js, n, t, Provision, nil)
	return err
}

// EnsureTopologyLogged is what a service runs at start: [Apply] in Check
// mode when t.NoProvision is set, else Provision, logging every change
// and retry to log.
func EnsureTopologyLogged(ctx context.Context, js jetstream.JetStream, n subjects.Names, t Topology, log *slog.Logger) error {
	mode := Provision
	if t.NoProvision {
		mode = Check
	}
	_, err := Apply(ctx, js, n, t, mode, log)
	return err
}

// Apply walks every stream (the tape stream included), bucket and shared
// durable consumer of the topology in mode. Provision creates what is
// missing and updates what differs, logging one line per created or
// updated resource, copies the tape indexes of an earlier version's
// bucket to the tape stream (tape.MigrateIndexBucket, logged), and retries transient JetStream
// errors (timeouts, no leader yet, a concurrent update) with backoff for
// at most [EnsureBound]. Check and DryRun change nothing. It returns the
// changes in order: streams, buckets, consumers.
func Apply(ctx context.Context, js jetstream.JetStream, n subjects.Names, t Topology, mode Mode, log *slog.Logger) ([]Change, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var changes []Change
	err := Retry(ctx, log, "topology", func(ctx context.Context) error {
		var err error
		changes, err = apply(ctx, js, n, t, mode, log)
		return err
	})
	return changes, err
}

func apply(ctx context.Context, js jetstream.JetStream, n subjects.Names, t Topology, mode Mode, log *slog.Logger) ([]Change, error) {
	var changes []Change
	for _, sc := range t.AllStreams(n) {
		c, err := applyStream(ctx, js, sc, mode, log)
		if err != nil {
			return nil, err
		}
		changes = append(changes, c)
	}
	if mode == Provision {
		if migrated, err := tape.MigrateIndexBucket(ctx, js, n); err != nil {
			return nil, err
		} else if migrated > 0 {
			log.Info("natsx.tape_indexes_migrated", "indexes", migrated, "from", n.TapeIndexBucket(), "to", n.TapesStream())
		}
	}
	for _, kc := range t.AllBuckets(n) {
		c, err := applyBucket(ctx, js, kc, mode, log)
		if err != nil {
			return nil, err
		}
		changes = append(changes, c)
	}
	for _, c := range []struct {
		stream string
		cfg    jetstream.ConsumerConfig
	}{{n.InboundStream(), t.WorkerConsumer(n)}, {n.EventsStream(), t.RecorderConsumer(n)}} {
		ch, err := ApplyConsumer(ctx, js, c.stream, c.cfg, mode, log)
		if err != nil {
			return nil, err
		}
		changes = append(changes, ch)
	}
	if mode == Check {
		var problems []string
		for _, c := range changes {
			if c.Action != ActionUnchanged {
				problems = append(problems, problem(c))
			}
		}
		if len(problems) > 0 {
			return changes, fmt.Errorf("%w (provisioning is off, BUB_PROVISION=false; run `bub provision` or create them): %s", ErrIncompatible, strings.Join(problems, "; "))
		}
	}
	return changes, nil
}

// problem names what Check found about c.
func problem(c Change) string {
	what := c.Kind + " " + c.Name
	if c.Stream != "" {
		what += " on stream " + c.Stream
	}
	if c.Action == ActionCreate {
		return what + " is missing"
	}
	return what + " differs: " + strings.Join(c.Diff, ", ")
}

// AllStreams is [Topology.Streams] and the tape stream, with the
// topology's replicas and placement.
func (t Topology) AllStreams(n subjects.Names) []jetstream.StreamConfig {
	t = t.withDefaults()
	streams := append(t.Streams(n), tape.StreamConfig(n))
	for i := range streams {
		streams[i].Replicas = t.Replicas
		streams[i].Placement = t.Placement
	}
	return streams
}

// AllBuckets is [Topology.Buckets] with the topology's replicas and
// placement.
func (t Topology) AllBuckets(n subjects.Names) []jetstream.KeyValueConfig {
	t = t.withDefaults()
	buckets := t.Buckets(n)
	for i := range buckets {
		buckets[i].Replicas = t.Replicas
		buckets[i].Placement = t.Placement
	}
	return buckets
}

// callTimeout bounds each JetStream API call of Apply, so that a call
// lost during a leader election is retried instead of using up the
// caller's context.
const callTimeout = 10 * time.Second

// resource is one stream, bucket or consumer as apply walks it.
type resource struct {
	change   Change
	replicas int
	// logKeys name it in log lines ("stream", name, …).
	logKeys []any
	// read returns the settings in which the existing resource differs
	// from the wanted one, or found false when it does not exist.
	read           func(ctx context.Context) (diff []string, found bool, err error)
	create, update func(ctx context.Context) error
}

func (r resource) what() string {
	w := r.change.Kind + " " + r.change.Name
	if r.change.Stream != "" {
		w += " on " + r.change.Stream
	}
	return w
}

// apply does to r what mode says and returns what it did or would do.
func (r resource) apply(ctx context.Context, mode Mode, log *slog.Logger) (Change, error) {
	c := r.change
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	diff, found, err := r.read(ctx)
	switch {
	case err != nil:
		return c, fmt.Errorf("reading %s: %w", r.what(), err)
	case !found:
		c.Action = ActionCreate
		if mode != Provision {
			return c, nil
		}
		if err := r.create(ctx); err != nil {
			return c, fmt.Errorf("creating %s: %w", r.what(), err)
		}
		log.Info("natsx."+c.Kind+"_created", append(r.logKeys, "replicas", r.replicas)...)
		return c, nil
	case len(diff) == 0:
		c.Action = ActionUnchanged
		return c, nil
	}
	c.Action, c.Diff = ActionUpdate, diff
	if mode != Provision {
		return c, nil
	}
	changes := strings.Join(diff, ", ")
	if err := r.update(ctx); err != nil {
		return c, fmt.Errorf("updating %s (%s): %w", r.what(), changes, err)
	}
	log.Info("natsx."+c.Kind+"_updated", append(r.logKeys, "changes", changes)...)
	return c, nil
}

func applyStream(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig, mode Mode, log *slog.Logger) (Change, error) {
	return resource{
		change:   Change{Kind: "stream", Name: want.Name, Config: want},
		replicas: want.Replicas,
		logKeys:  []any{"stream", want.Name},
		read: func(ctx context.Context) ([]string, bool, error) {
			s, err := js.Stream(ctx, want.Name)
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				return nil, false, nil
			}
			if err != nil {
				return nil, false, err
			}
			return streamDiff(want, s.CachedInfo().Config, mode != Check), true, nil
		},
		create: func(ctx context.Context) error { _, err := js.CreateStream(ctx, want); return err },
		update: func(ctx context.Context) error { _, err := js.UpdateStream(ctx, want); return err },
	}.apply(ctx, mode, log)
}

func applyBucket(ctx context.Context, js jetstream.JetStream, want jetstream.KeyValueConfig, mode Mode, log *slog.Logger) (Change, error) {
	return resource{
		change:   Change{Kind: "bucket", Name: want.Bucket, Config: want},
		replicas: want.Replicas,
		logKeys:  []any{"bucket", want.Bucket},
		read: func(ctx context.Context) ([]string, bool, error) {
			kv, err := js.KeyValue(ctx, want.Bucket)
			if errors.Is(err, jetstream.ErrBucketNotFound) {
				return nil, false, nil
			}
			if err != nil {
				return nil, false, err
			}
			st, err := kv.Status(ctx)
			if err != nil {
				return nil, false, err
			}
			info := st.(*jetstream.KeyValueBucketStatus).StreamInfo()
			return streamDiff(bucketStream(want), info.Config, mode != Check), true, nil
		},
		create: func(ctx context.Context) error { _, err := js.CreateKeyValue(ctx, want); return err },
		update: func(ctx context.Context) error { _, err := js.UpdateKeyValue(ctx, want); return err },
	}.apply(ctx, mode, log)
}

// ApplyConsumer does to the durable consumer want on stream what mode
// says (see [Apply]; it does not retry).
func ApplyConsumer(ctx context.Context, js jetstream.JetStream, stream string, want jetstream.ConsumerConfig, mode Mode, log *slog.Logger) (Change, error) {
	return resource{
		change:   Change{Kind: "consumer", Name: want.Durable, Stream: stream, Config: want},
		replicas: want.Replicas,
		logKeys:  []any{"stream", stream, "consumer", want.Durable},
		read: func(ctx context.Context) ([]string, bool, error) {
			cons, err := js.Consumer(ctx, stream, want.Durable)
			if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
				return nil, false, nil
			}
			if err != nil {
				return nil, false, err
			}
			return consumerDiff(want, cons.CachedInfo().Config), true, nil
		},
		create: func(ctx context.Context) error { _, err := js.CreateConsumer(ctx, stream, want); return err },
		update: func(ctx context.Context) error { _, err := js.UpdateConsumer(ctx, stream, want); return err },
	}.apply(ctx, mode, log)
}

// bucketStream is the part of the backing stream of bucket want that
// [streamDiff] compares, the way JetStream derives it.
func bucketStream(want jetstream.KeyValueConfig) jetstream.StreamConfig {
	history := int64(want.History)
	if history == 0 {
		history = 1
	}
	return jetstream.StreamConfig{
		Name:                   "KV_" + want.Bucket,
		Subjects:               []string{"$KV." + want.Bucket + ".>"},
		Retention:              jetstream.LimitsPolicy,
		Storage:                want.Storage,
		Replicas:               want.Replicas,
		Placement:              want.Placement,
		MaxAge:                 want.TTL,
		MaxMsgsPerSubject:      history,
		SubjectDeleteMarkerTTL: want.LimitMarkerTTL,
		AllowDirect:            true,
	}
}

// streamDiff lists the settings in which have differs from want.
// Settings want leaves zero are the server's and not compared; retention
// limits (max age, max bytes, history) only with limits set: an operator
// may tune them without making the topology incompatible.
func streamDiff(want, have jetstream.StreamConfig, limits bool) []string {
	var d differ
	d.add("subjects", sortedJoin(have.Subjects), sortedJoin(want.Subjects))
	d.add("retention", have.Retention.String(), want.Retention.String())
	d.add("storage", have.Storage.String(), want.Storage.String())
	d.add("replicas", have.Replicas, want.Replicas)
	d.add("allow_direct", have.AllowDirect, want.AllowDirect)
	if want.AllowAtomicPublish {
		d.add("allow_atomic", have.AllowAtomicPublish, want.AllowAtomicPublish)
	}
	if want.AllowRollup {
		d.add("allow_rollup_hdrs", have.AllowRollup, want.AllowRollup)
	}
	if want.Duplicates != 0 {
		d.add("duplicate_window", have.Duplicates, want.Duplicates)
	}
	if want.SubjectDeleteMarkerTTL != 0 {
		d.add("limit_marker_ttl", have.SubjectDeleteMarkerTTL, want.SubjectDeleteMarkerTTL)
	}
	if want.Placement != nil {
		var hp jetstream.Placement
		if have.Placement != nil {
			hp = *have.Placement
		}
		d.add("placement_cluster", hp.Cluster, want.Placement.Cluster)
		d.add("placement_tags", sortedJoin(hp.Tags), sortedJoin(want.Placement.Tags))
	}
	if limits {
		d.add("max_age", have.MaxAge, want.MaxAge)
		wantBytes := want.MaxBytes
		if wantBytes == 0 {
			wantBytes = -1
		}
		d.add("max_bytes", have.MaxBytes, wantBytes)
		if want.MaxMsgsPerSubject != 0 {
			d.add("history", have.MaxMsgsPerSubject, want.MaxMsgsPerSubject)
		}
	}
	return d.diff
}

// consumerDiff lists the settings in which consumer have differs from
// want.
func consumerDiff(want, have jetstream.ConsumerConfig) []string {
	var d differ
	d.add("filter_subject", have.FilterSubject, want.FilterSubject)
	d.add("ack_policy", have.AckPolicy.String(), want.AckPolicy.String())
	d.add("ack_wait", have.AckWait, want.AckWait)
	d.add("max_deliver", have.MaxDeliver, want.MaxDeliver)
	d.add("max_ack_pending", have.MaxAckPending, want.MaxAckPending)
	if want.Replicas != 0 {
		d.add("replicas", have.Replicas, want.Replicas)
	}
	return d.diff
}

type differ struct{ diff []string }

func (d *differ) add(name string, have, want any) {
	if have != want {
		d.diff = append(d.diff, fmt.Sprintf("%s %v → %v", name, have, want))
	}
}

func sortedJoin(s []string) string {
	s = slices.Clone(s)
	slices.Sort(s)
	return "[" + strings.Join(s, " ") + "]"
}

// EnsureBound bounds how long [Retry] retries.
var EnsureBound = time.Minute

// Retry runs op until it succeeds, fails with an error that is not
// transient ([jsretry.Transient]: a cluster electing leaders or
// updating a stream concurrently), ctx ends or [EnsureBound] has passed,
// waiting between attempts with exponential backoff (250ms doubling up to
// 5s, with jitter) and logging each retry.
func Retry(ctx context.Context, log *slog.Logger, what string, op func(context.Context) error) error {
	b := jsretry.Backoff{First: 250 * time.Millisecond, Max: 5 * time.Second}
	return b.Do(ctx, time.Now().Add(EnsureBound), func(attempt int, wait time.Duration, err error) {
		log.Warn("natsx.retry", "what", what, "attempt", attempt, "wait", wait, "err", err)
	}, op)
}
