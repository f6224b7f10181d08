package status

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/pkg/hooks/interceptor"
	"github.com/bubbus/bub/pkg/hooks/remote"
	"github.com/bubbus/bub/pkg/subjects"
)

// timeout bounds each group of NATS requests of [Collect].
const timeout = 5 * time.Second

// discoveryWait is how long [Collect] collects NATS micro replies after
// the first one.
const discoveryWait = 300 * time.Millisecond

// Status is what `bub status` prints and GET /v1/status answers.
type Status struct {
	Server    Server     `json:"server"`
	Streams   []Stream   `json:"streams"`
	Consumers []Consumer `json:"consumers"` // the durable ones
	// Services are the running instances of every Bub service of the
	// deployment (ingress, worker, recorder, gateway), found by NATS
	// micro discovery.
	Services     []ServiceInstance `json:"services"`
	Workers      Workers           `json:"workers"`
	Interceptors []Interceptor     `json:"interceptors"`
	Recorder     *Recorder         `json:"recorder,omitempty"`
	DeadLetters  DeadLetters       `json:"dead_letters"`
	Errors       []string          `json:"errors,omitempty"`
}

// Server is the NATS server the status was read from.
type Server struct {
	URL       string `json:"url"`
	Version   string `json:"version"`
	Streams   int    `json:"jetstream_streams"`
	Consumers int    `json:"jetstream_consumers"`
	Storage   uint64 `json:"jetstream_storage_bytes"`
	// MaxPayload is the largest message the server takes (max_payload).
	MaxPayload int64 `json:"max_payload"`
}

// Stream is one Bub stream, or the stream of one of its KV buckets
// (KV_<bucket>).
type Stream struct {
	Name      string    `json:"name"`
	Messages  uint64    `json:"messages"`
	Bytes     uint64    `json:"bytes"`
	FirstSeq  uint64    `json:"first_seq"`
	LastSeq   uint64    `json:"last_seq"`
	LastTime  time.Time `json:"last_time"`
	Consumers int       `json:"consumers"`
	// Replicas is the configured replica count; Leader the server that
	// leads the stream ("" on a single server without clustering);
	// Followers the other replicas (from StreamInfo.Cluster).
	Replicas  int       `json:"replicas"`
	Leader    string    `json:"leader,omitempty"`
	Followers []Replica `json:"followers,omitempty"`
}

// Replica is a follower of a replicated stream.
type Replica struct {
	Name string `json:"name"`
	// Current reports whether it is caught up with the leader.
	Current bool `json:"current"`
	Offline bool `json:"offline,omitempty"`
	// Lag is how many operations it is behind the leader.
	Lag uint64 `json:"lag"`
}

// Consumer is one consumer of a Bub stream.
type Consumer struct {
	Stream      string     `json:"stream"`
	Name        string     `json:"name"`
	Pending     uint64     `json:"pending"`
	AckPending  int        `json:"ack_pending"`
	Redelivered int        `json:"redelivered"`
	Waiting     int        `json:"waiting"`
	AckFloor    uint64     `json:"ack_floor_stream_seq"`
	LastActive  *time.Time `json:"last_active,omitempty"`
}

// Workers is what NATS shows of the workers.
type Workers struct {
	// WaitingPulls are open pull requests on the shared worker consumer
	// (each idle worker keeps some open).
	WaitingPulls int `json:"waiting_pulls"`
	// RunningTurns are the live run keys of the turn registry by owner.
	RunningTurns map[string]int `json:"running_turns"`
	// Instances are the running worker instances: the worker service's
	// among Status.Services, with their load.
	Instances []WorkerInstance `json:"instances"`
}

// ServiceInstance is one running instance of a Bub service as NATS micro
// discovery shows it.
type ServiceInstance struct {
	// Service is ingress, worker, recorder or gateway; Instance its
	// BUB_INSTANCE (a worker's owner name in the turn registry); ID its
	// NATS micro id.
	Service  string    `json:"service"`
	Instance string    `json:"instance"`
	ID       string    `json:"id"`
	Version  string    `json:"version"`
	Started  time.Time `json:"started"`
	// MaxPayload is the largest message it sends (ServiceStatus).
	MaxPayload int64 `json:"max_payload,omitempty"`
}

// WorkerInstance is one running worker instance as NATS micro discovery
// shows it, with its load.
type WorkerInstance struct {
	ServiceInstance
	WorkerLoad
}

// WorkerLoad is the details of a worker's [ServiceStatus]: the turns it
// runs now and at most.
type WorkerLoad struct {
	RunningTurns int `json:"running_turns"`
	Concurrency  int `json:"concurrency"`
}

// Interceptor is one instance of an interceptor service (NATS micro)
// with its request statistics.
type Interceptor struct {
	Service  string        `json:"service"`
	Version  string        `json:"version"`
	ID       string        `json:"id"`
	Plugin   string        `json:"plugin,omitempty"`
	Hooks    []string      `json:"hooks"`
	Requests int           `json:"requests"`
	Errors   int           `json:"errors"`
	Average  time.Duration `json:"average_processing_time"`
	Started  time.Time     `json:"started"`
}

// Recorder is the recorder consumer's progress.
type Recorder struct {
	Pending    uint64 `json:"pending"`
	AckPending int    `json:"ack_pending"`
	// Lag counts the events not yet committed to a tape: not yet
	// delivered to the recorder, or delivered and held until their run
	// is complete.
	Lag uint64 `json:"lag"`
	// OldestHeld is how far the oldest uncommitted event is behind the
	// events stream's head (0 when none is held).
	OldestHeld uint64 `json:"oldest_held_behind_head"`
}

// DeadLetters counts the dead-letter stream's messages.
type DeadLetters struct {
	Messages uint64            `json:"messages"`
	ByReason map[string]uint64 `json:"by_reason"`
}

// Collect gathers the status; a part that cannot be read is
// reported in Errors and the rest still shown.
func Collect(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, n subjects.Names) *Status {
	st := &Status{Server: Server{URL: nc.ConnectedUrlRedacted(), Version: nc.ConnectedServerVersion(), MaxPayload: nc.MaxPayload()}}
	fail := func(what string, err error) { st.Errors = append(st.Errors, fmt.Sprintf("%s: %v", what, err)) }
	if st.Server.MaxPayload < natsx.MaxPayload {
		fail("max_payload", fmt.Errorf("the server takes messages of at most %d bytes, Bub's configs %d: a turn with a larger event fails (README, Message size)", st.Server.MaxPayload, natsx.MaxPayload))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	if ai, err := js.AccountInfo(ctx); err != nil {
		fail("jetstream account", err)
	} else {
		st.Server.Streams, st.Server.Consumers, st.Server.Storage = ai.Streams, ai.Consumers, ai.Store
	}
	names := []string{n.InboundStream(), n.EventsStream(), n.OutboundStream(), n.TapesStream(), n.SteerStream(), n.DLQStream()}
	for _, b := range (natsx.Topology{}).Buckets(n) {
		names = append(names, n.KVStream(b.Bucket)) // replicated as the streams are, and caught up on their own
	}
	for _, name := range names {
		s, err := js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			fail("stream "+name, err)
			continue
		}
		info := s.CachedInfo()
		st.Streams = append(st.Streams, Stream{Name: name, Messages: info.State.Msgs, Bytes: info.State.Bytes,
			FirstSeq: info.State.FirstSeq, LastSeq: info.State.LastSeq, LastTime: info.State.LastTime, Consumers: info.State.Consumers,
			Replicas: info.Config.Replicas})
		if c := info.Cluster; c != nil {
			last := &st.Streams[len(st.Streams)-1]
			last.Leader = c.Leader
			for _, p := range c.Replicas {
				last.Followers = append(last.Followers, Replica{Name: p.Name, Current: p.Current, Offline: p.Offline, Lag: p.Lag})
			}
		}
		lister := s.ListConsumers(ctx)
		for ci := range lister.Info() {
			if ci.Config.Durable == "" {
				continue // a reader's ephemeral consumer (ingress's replies, a tape read), not the deployment's
			}
			cs := Consumer{Stream: name, Name: ci.Name, Pending: ci.NumPending, AckPending: ci.NumAckPending,
				Redelivered: ci.NumRedelivered, Waiting: ci.NumWaiting, AckFloor: ci.AckFloor.Stream, LastActive: ci.Delivered.Last}
			st.Consumers = append(st.Consumers, cs)
			switch {
			case name == n.InboundStream() && ci.Name == n.WorkerConsumer():
				st.Workers.WaitingPulls = ci.NumWaiting
			case name == n.EventsStream() && ci.Name == n.RecorderConsumer():
				st.Recorder = &Recorder{Pending: ci.NumPending, AckPending: ci.NumAckPending,
					Lag: ci.NumPending + uint64(ci.NumAckPending)}
				if st.Recorder.Lag > 0 && info.State.LastSeq > ci.AckFloor.Stream {
					st.Recorder.OldestHeld = info.State.LastSeq - ci.AckFloor.Stream
				}
			}
		}
		if err := lister.Err(); err != nil {
			fail("consumers of "+name, err)
		}
		if name == n.DLQStream() {
			st.DeadLetters = deadLetters(ctx, s, n, fail)
		}
	}
	st.Workers.RunningTurns = runningTurns(ctx, js, n, fail)
	stats := microStats(ctx, nc, fail)
	st.Services, st.Workers.Instances = discoverServices(stats, n, fail)
	for _, si := range st.Services {
		checkMaxPayload(si, st.Server, fail)
	}
	st.Interceptors = discoverInterceptors(ctx, nc, n, stats, fail)
	return st
}

// checkMaxPayload warns about a service instance that sends messages up
// to another max_payload than server takes: a client learns max_payload
// only when it connects, so after a configuration reload changed it the
// instance goes on with the old one until it connects again.
func checkMaxPayload(si ServiceInstance, server Server, fail func(string, error)) {
	have, want := si.MaxPayload, server.MaxPayload
	if have == 0 || have == want {
		return
	}
	todo := "restart it to send larger ones"
	if have > want {
		todo = "restart it before it sends more, which makes the server close its connection"
	}
	fail("max_payload", fmt.Errorf("%s %s sends messages of at most %d bytes (its server's max_payload when it connected); the server at %s takes %d: %s",
		si.Service, si.Instance, have, server.URL, want, todo))
}

// deadLetters counts the DLQ stream's messages by reason (the last
// subject token).
func deadLetters(ctx context.Context, s jetstream.Stream, n subjects.Names, fail func(string, error)) DeadLetters {
	out := DeadLetters{ByReason: map[string]uint64{}}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(n.DLQAll()))
	if err != nil {
		fail("dead letters", err)
		return out
	}
	out.Messages = info.State.Msgs
	for subj, c := range info.State.Subjects {
		reason := subj[strings.LastIndexByte(subj, '.')+1:]
		if r, err := subjects.ParseToken(reason); err == nil {
			reason = r
		}
		out.ByReason[reason] += c
	}
	return out
}

// runningTurns counts the live run keys of the turn registry by owner.
func runningTurns(ctx context.Context, js jetstream.JetStream, n subjects.Names, fail func(string, error)) map[string]int {
	out := map[string]int{}
	kv, err := js.KeyValue(ctx, n.TurnsBucket())
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return out
	}
	if err != nil {
		fail("turn registry", err)
		return out
	}
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		fail("turn registry", err)
		return out
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case e := <-w.Updates():
			if e == nil {
				return out
			}
			if !strings.Contains(e.Key(), ".run.") {
				continue
			}
			var v struct {
				Owner string `json:"owner"`
			}
			if json.Unmarshal(e.Value(), &v) == nil && v.Owner != "" {
				out[v.Owner]++
			}
		case <-ctx.Done():
			fail("turn registry", ctx.Err())
			return out
		}
	}
}

// discoverInterceptors asks every NATS micro service for its info
// ($SRV.INFO) and keeps the Bub interceptors, services with endpoints
// under bub.hook.>, with their request figures from stats ([microStats]).
func discoverInterceptors(ctx context.Context, nc *nats.Conn, n subjects.Names, stats map[string]micro.Stats, fail func(string, error)) []Interceptor {
	hookPrefix := strings.TrimSuffix(n.HookAll(), ">")
	infos := map[string]micro.Info{}
	for _, raw := range microAll(ctx, nc, micro.InfoVerb, fail) {
		var info micro.Info
		if json.Unmarshal(raw, &info) == nil && info.ID != "" {
			infos[info.ID] = info
		}
	}
	var out []Interceptor
	for id, info := range infos {
		is := Interceptor{Service: info.Name, Version: info.Version, ID: id, Plugin: info.Metadata[interceptor.MetadataPlugin]}
		for _, ep := range info.Endpoints {
			if strings.HasPrefix(ep.Subject, hookPrefix) {
				is.Hooks = append(is.Hooks, ep.Name)
			}
		}
		if len(is.Hooks) == 0 {
			continue // another application's service
		}
		if s, ok := stats[id]; ok {
			is.Started = s.Started
			var total time.Duration
			for _, ep := range s.Endpoints {
				is.Requests += ep.NumRequests
				is.Errors += ep.NumErrors
				total += ep.ProcessingTime
			}
			if is.Requests > 0 {
				is.Average = total / time.Duration(is.Requests)
			}
		}
		out = append(out, is)
	}
	slices.SortFunc(out, func(a, b Interceptor) int {
		return cmp.Or(cmp.Compare(a.Service, b.Service), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// microStats asks every NATS micro service for its stats, by id.
func microStats(ctx context.Context, nc *nats.Conn, fail func(string, error)) map[string]micro.Stats {
	stats := map[string]micro.Stats{}
	for _, raw := range microAll(ctx, nc, micro.StatsVerb, fail) {
		var s micro.Stats
		if json.Unmarshal(raw, &s) == nil && s.ID != "" {
			stats[s.ID] = s
		}
	}
	return stats
}

// discoverServices returns, from every micro service's stats, the
// instances of the Bub services of n's prefix, and the workers among them
// with their load.
func discoverServices(stats map[string]micro.Stats, n subjects.Names, fail func(string, error)) ([]ServiceInstance, []WorkerInstance) {
	services, workers := []ServiceInstance{}, []WorkerInstance{}
	for _, s := range stats {
		service := s.Metadata[MetadataService]
		if service == "" || s.Metadata[MetadataPrefix] != n.Prefix() {
			continue // an interceptor, or another deployment's or application's service
		}
		si := ServiceInstance{Service: service, Instance: s.Metadata[MetadataInstance], ID: s.ID, Version: s.Version, Started: s.Started}
		var st ServiceStatus
		for _, ep := range s.Endpoints {
			if ep.Name == Endpoint && json.Unmarshal(ep.Data, &st) == nil {
				si.MaxPayload = st.MaxPayload
				break
			}
		}
		services = append(services, si)
		if service != "worker" {
			continue
		}
		w := WorkerInstance{ServiceInstance: si}
		if err := json.Unmarshal(st.Details, &w.WorkerLoad); len(st.Details) > 0 && err != nil {
			fail("worker "+w.Instance, fmt.Errorf("status details: %w", err))
		}
		workers = append(workers, w)
	}
	byName := func(a, b ServiceInstance) int {
		return cmp.Or(cmp.Compare(a.Service, b.Service), cmp.Compare(a.Instance, b.Instance), cmp.Compare(a.ID, b.ID))
	}
	slices.SortFunc(services, byName)
	slices.SortFunc(workers, func(a, b WorkerInstance) int { return byName(a.ServiceInstance, b.ServiceInstance) })
	return services, workers
}

// microAll asks every NATS micro service for verb ([remote.Discover]);
// a failure is reported and leaves no replies.
func microAll(ctx context.Context, nc *nats.Conn, verb micro.Verb, fail func(string, error)) [][]byte {
	replies, err := remote.Discover(ctx, nc, verb, "", time.Second, discoveryWait)
	if err != nil {
		fail("micro discovery", err)
	}
	return replies
}
