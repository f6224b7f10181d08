package natsx

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/pkg/subjects"
)

// Topology sizes the streams, consumers and buckets. The zero value means
// the documented defaults.
type Topology struct {
	// Replicas of every stream, bucket and shared durable consumer: 1, 3
	// or 5 (BUB_REPLICAS, --replicas; 0 = 1).
	Replicas int
	// Placement, when set, places every stream and bucket in a cluster
	// and/or on servers with tags (BUB_PLACEMENT_CLUSTER,
	// BUB_PLACEMENT_TAGS).
	Placement *jetstream.Placement
	// NoProvision makes services create and update nothing: they check
	// that the topology exists with compatible settings instead
	// (BUB_PROVISION=false, --no-provision; see [Apply]).
	NoProvision bool
	// MemoryStorage keeps streams in memory instead of files (tests only).
	MemoryStorage bool
	// DuplicateWindow for inbound/outbound/events deduplication (2m).
	DuplicateWindow time.Duration
	// EventsMaxAge bounds lifecycle event retention (7 days).
	EventsMaxAge time.Duration
	// EventsMaxBytes bounds lifecycle event storage (-1 = unlimited).
	EventsMaxBytes int64
	// OutboundMaxAge bounds outbound envelope retention (24h).
	OutboundMaxAge time.Duration
	// WorkerAckWait is how long a worker may hold an inbound message
	// without an in-progress ack before it is redelivered (30s).
	WorkerAckWait time.Duration
	// WorkerMaxDeliver bounds inbound deliveries before dead-lettering (5).
	WorkerMaxDeliver int
	// RecorderAckWait is the recorder's ack wait on lifecycle events (30s):
	// after a recorder crash, the events of unfinished runs come back to
	// the next recorder this long afterwards.
	RecorderAckWait time.Duration
	// TurnTTL is how long a turn registry entry lives without a heartbeat
	// (30s).
	TurnTTL time.Duration
	// GatewayAckWait is how long a gateway may hold an outbound message
	// without an in-progress ack before it is redelivered; a delivery
	// claim older than this is taken over (30s).
	GatewayAckWait time.Duration
	// GatewayMaxDeliver bounds outbound deliveries before dead-lettering
	// (10).
	GatewayMaxDeliver int
}

func (t Topology) withDefaults() Topology {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if t.Replicas == 0 {
		t.Replicas = 1
	}
	def(&t.DuplicateWindow, 2*time.Minute)
	def(&t.EventsMaxAge, 7*24*time.Hour)
	if t.EventsMaxBytes == 0 {
		t.EventsMaxBytes = -1
	}
	def(&t.OutboundMaxAge, 24*time.Hour)
	def(&t.WorkerAckWait, 30*time.Second)
	if t.WorkerMaxDeliver == 0 {
		t.WorkerMaxDeliver = 5
	}
	def(&t.RecorderAckWait, 30*time.Second)
	def(&t.TurnTTL, 30*time.Second)
	def(&t.GatewayAckWait, 30*time.Second)
	if t.GatewayMaxDeliver == 0 {
		t.GatewayMaxDeliver = 10
	}
	return t
}

// Validate reports impossible settings.
func (t Topology) Validate() error {
	var errs []error
	switch t.Replicas {
	case 0, 1, 3, 5:
	default:
		errs = append(errs, fmt.Errorf("replicas must be 1, 3 or 5, got %d", t.Replicas))
	}
	if t.WorkerMaxDeliver < 0 {
		errs = append(errs, errors.New("worker max deliver must be positive"))
	}
	if t.GatewayMaxDeliver < 0 {
		errs = append(errs, errors.New("gateway max deliver must be positive"))
	}
	return errors.Join(errs...)
}

func (t Topology) storage() jetstream.StorageType {
	if t.MemoryStorage {
		return jetstream.MemoryStorage
	}
	return jetstream.FileStorage
}

// Streams returns the configuration of every stream Bub uses, except the
// tape stream, which package tape owns.
func (t Topology) Streams(n subjects.Names) []jetstream.StreamConfig {
	t = t.withDefaults()
	return []jetstream.StreamConfig{
		{
			Name:        n.InboundStream(),
			Description: "bub inbound envelopes (work queue)",
			Subjects:    []string{n.InboundAll()},
			Retention:   jetstream.WorkQueuePolicy,
			Storage:     t.storage(),
			Replicas:    t.Replicas,
			Duplicates:  t.DuplicateWindow,
		},
		{
			Name:        n.EventsStream(),
			Description: "bub lifecycle events (CloudEvents)",
			Subjects:    []string{n.EventsAll()},
			Retention:   jetstream.LimitsPolicy,
			Storage:     t.storage(),
			Replicas:    t.Replicas,
			Duplicates:  t.DuplicateWindow,
			MaxAge:      t.EventsMaxAge,
			MaxBytes:    t.EventsMaxBytes,
			// Every turn reads the session's last run end before it
			// starts (read-your-writes), and that read must see the
			// newest stored event. On one server a direct get does, and
			// skips the JetStream API queue (and its advisory); with
			// replicas a direct get may be answered by a follower that
			// lags, so the read goes to the leader through the API.
			AllowDirect: t.Replicas == 1,
		},
		{
			Name:        n.OutboundStream(),
			Description: "bub outbound envelopes",
			Subjects:    []string{n.OutboundAll()},
			Retention:   jetstream.LimitsPolicy,
			Storage:     t.storage(),
			Replicas:    t.Replicas,
			Duplicates:  t.DuplicateWindow,
			MaxAge:      t.OutboundMaxAge,
		},
		{
			Name:        n.SteerStream(),
			Description: "bub steering messages for running turns",
			Subjects:    []string{n.SteerAll()},
			Retention:   jetstream.LimitsPolicy,
			Storage:     t.storage(),
			Replicas:    t.Replicas,
			Duplicates:  t.DuplicateWindow,
			MaxAge:      t.EventsMaxAge,
			// Workers look for steering messages at every turn: direct
			// gets skip the JetStream API queue.
			AllowDirect: true,
		},
		{
			Name:        n.DLQStream(),
			Description: "bub dead letters with their reasons",
			Subjects:    []string{n.DLQAll()},
			Retention:   jetstream.LimitsPolicy,
			Storage:     t.storage(),
			Replicas:    t.Replicas,
			MaxAge:      30 * 24 * time.Hour,
		},
	}
}

// WorkerConsumer is the shared durable pull consumer of every worker.
func (t Topology) WorkerConsumer(n subjects.Names) jetstream.ConsumerConfig {
	t = t.withDefaults()
	return jetstream.ConsumerConfig{
		Durable:       n.WorkerConsumer(),
		Description:   "bub workers (shared)",
		Replicas:      t.Replicas,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       t.WorkerAckWait,
		MaxDeliver:    t.WorkerMaxDeliver,
		MaxAckPending: 10000,
		FilterSubject: n.InboundAll(),
	}
}

// RecorderConsumer is the recorder's durable consumer on lifecycle events.
// Events stay unacknowledged until their run is committed to the tape, so
// MaxAckPending is large.
func (t Topology) RecorderConsumer(n subjects.Names) jetstream.ConsumerConfig {
	t = t.withDefaults()
	return jetstream.ConsumerConfig{
		Durable:       n.RecorderConsumer(),
		Description:   "bub recorder (only tape writer)",
		Replicas:      t.Replicas,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       t.RecorderAckWait,
		MaxDeliver:    -1,
		MaxAckPending: 100000,
		FilterSubject: n.EventsAll(),
	}
}

// GatewayConsumer is the durable pull consumer on outbound envelopes of
// channel that every gateway instance running the channel shares (each
// message goes to one instance). The outbound stream has limits retention
// and keeps every reply for OutboundMaxAge, so a consumer created for the
// first time starts with new messages (DeliverNew) instead of replaying
// the stream's history; once it exists it resumes where it stopped.
func (t Topology) GatewayConsumer(n subjects.Names, channel string) jetstream.ConsumerConfig {
	t = t.withDefaults()
	return jetstream.ConsumerConfig{
		Durable:       n.GatewayConsumer(channel),
		Description:   "bub gateways delivering outbound envelopes of channel " + channel + " (shared)",
		Replicas:      t.Replicas,
		DeliverPolicy: jetstream.DeliverNewPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       t.GatewayAckWait,
		MaxDeliver:    t.GatewayMaxDeliver,
		MaxAckPending: 10000,
		FilterSubject: n.OutboundOfChannel(channel),
	}
}

// Buckets returns the KV buckets (state, turn registry, approvals,
// delivery marks).
func (t Topology) Buckets(n subjects.Names) []jetstream.KeyValueConfig {
	t = t.withDefaults()
	return []jetstream.KeyValueConfig{
		{
			Bucket:      n.StateBucket(),
			Description: "bub per-session state",
			Storage:     t.storage(),
			Replicas:    t.Replicas,
		},
		{
			Bucket:         n.TurnsBucket(),
			Description:    "bub turn registry",
			Storage:        t.storage(),
			Replicas:       t.Replicas,
			LimitMarkerTTL: t.TurnTTL,
		},
		{
			// An approval's record outlives its deadline: it is the
			// answer a late redelivery of its turn reads.
			Bucket:      n.ApprovalsBucket(),
			Description: "bub approvals of parked tool calls",
			Storage:     t.storage(),
			Replicas:    t.Replicas,
		},
		{
			// A mark lives as long as the outbound message it marks.
			Bucket:      n.DeliveredBucket(),
			Description: "bub gateway delivery marks of outbound envelopes",
			Storage:     t.storage(),
			Replicas:    t.Replicas,
			TTL:         t.OutboundMaxAge,
		},
	}
}

// ParseTags parses a comma-separated list of placement tags
// (BUB_PLACEMENT_TAGS): "" is none; every tag is non-empty after
// trimming and has no whitespace or comma inside.
func ParseTags(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var tags []string
	for _, f := range strings.Split(s, ",") {
		tag := strings.TrimSpace(f)
		if tag == "" {
			return nil, fmt.Errorf("empty tag in %q", s)
		}
		if strings.IndexFunc(tag, unicode.IsSpace) >= 0 {
			return nil, fmt.Errorf("tag %q has whitespace", tag)
		}
		tags = append(tags, tag)
	}
	return tags, nil
}

// ParseSync parses a JetStream sync setting (BUB_JS_SYNC): "always"
// fsyncs every write; a positive duration fsyncs at that interval; ""
// keeps the server's default (2m).
func ParseSync(s string) (interval time.Duration, always bool, err error) {
	switch s = strings.TrimSpace(s); {
	case s == "":
		return 0, false, nil
	case strings.EqualFold(s, "always"):
		return 0, true, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, false, fmt.Errorf("%q: want always or a positive duration such as 1s", s)
	}
	return d, false, nil
}
