package bubcmd

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/spf13/cobra"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/hooks/interceptor"
	"github.com/bubbus/bub/pkg/subjects"
)

// statusTimeout bounds each group of NATS requests of `bub status`.
const statusTimeout = 5 * time.Second

// discoveryWait is how long `bub status` collects NATS micro replies after
// the first one.
const discoveryWait = 300 * time.Millisecond

func newStatus(env *Env) *cobra.Command {
	getenv := env.Getenv
	var common cli.Common
	var asJSON bool
	var recent int
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show streams, consumers, workers, interceptors and recorder lag",
		Long: `Prints the state of a Bub deployment as NATS sees it: every Bub stream
with its message count, every consumer with pending and ack-pending counts,
the workers (turns running in the turn registry, pull requests waiting on
the shared consumer, and the worker instances seen in the newest lifecycle
events), the interceptor services discovered through NATS micro with their
request statistics, the recorder's lag and the dead letters by reason.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClient(cmd.Context(), &common, getenv, func(ctx context.Context, c *client) error {
				st := collectStatus(ctx, c.conn.NC, c.conn.JS, c.conn.Names, recent)
				if asJSON {
					enc := json.NewEncoder(cmd.OutOrStdout())
					enc.SetIndent("", "  ")
					return enc.Encode(st)
				}
				st.print(cmd.OutOrStdout())
				return nil
			})
		},
	}
	common.Bind(cmd.Flags(), getenv)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON")
	cmd.Flags().IntVar(&recent, "recent", 1000, "how many of the newest lifecycle events to scan for active workers")
	return cmd
}

// status is what `bub status` reports.
type status struct {
	Server       serverStatus        `json:"server"`
	Streams      []streamStatus      `json:"streams"`
	Consumers    []consumerStatus    `json:"consumers"`
	Workers      workerStatus        `json:"workers"`
	Interceptors []interceptorStatus `json:"interceptors"`
	Recorder     *recorderStatus     `json:"recorder,omitempty"`
	DeadLetters  dlqStatus           `json:"dead_letters"`
	Errors       []string            `json:"errors,omitempty"`
}

type serverStatus struct {
	URL       string `json:"url"`
	Version   string `json:"version"`
	Streams   int    `json:"jetstream_streams"`
	Consumers int    `json:"jetstream_consumers"`
	Storage   uint64 `json:"jetstream_storage_bytes"`
}

type streamStatus struct {
	Name      string    `json:"name"`
	Messages  uint64    `json:"messages"`
	Bytes     uint64    `json:"bytes"`
	FirstSeq  uint64    `json:"first_seq"`
	LastSeq   uint64    `json:"last_seq"`
	LastTime  time.Time `json:"last_time"`
	Consumers int       `json:"consumers"`
}

type consumerStatus struct {
	Stream      string     `json:"stream"`
	Name        string     `json:"name"`
	Pending     uint64     `json:"pending"`
	AckPending  int        `json:"ack_pending"`
	Redelivered int        `json:"redelivered"`
	Waiting     int        `json:"waiting"`
	AckFloor    uint64     `json:"ack_floor_stream_seq"`
	LastActive  *time.Time `json:"last_active,omitempty"`
}

type workerStatus struct {
	// WaitingPulls are open pull requests on the shared worker consumer
	// (each idle worker keeps some open).
	WaitingPulls int `json:"waiting_pulls"`
	// RunningTurns are the live run keys of the turn registry by owner.
	RunningTurns map[string]int `json:"running_turns"`
	// Recent are the worker instances seen in the newest lifecycle events.
	Recent       []workerSeen `json:"recent"`
	ScannedEvent int          `json:"scanned_events"`
}

type workerSeen struct {
	Instance string    `json:"instance"`
	Events   int       `json:"events"`
	Runs     int       `json:"runs"`
	Last     time.Time `json:"last_event"`
}

type interceptorStatus struct {
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

type recorderStatus struct {
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

type dlqStatus struct {
	Messages uint64            `json:"messages"`
	ByReason map[string]uint64 `json:"by_reason"`
}

// collectStatus gathers the status; a part that cannot be read is
// reported in Errors and the rest still shown.
func collectStatus(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, n subjects.Names, recent int) *status {
	st := &status{Server: serverStatus{URL: nc.ConnectedUrlRedacted(), Version: nc.ConnectedServerVersion()}}
	fail := func(what string, err error) { st.Errors = append(st.Errors, fmt.Sprintf("%s: %v", what, err)) }
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()

	if ai, err := js.AccountInfo(ctx); err != nil {
		fail("jetstream account", err)
	} else {
		st.Server.Streams, st.Server.Consumers, st.Server.Storage = ai.Streams, ai.Consumers, ai.Store
	}
	for _, name := range []string{n.InboundStream(), n.EventsStream(), n.OutboundStream(), n.TapesStream(), n.SteerStream(), n.DLQStream()} {
		s, err := js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			fail("stream "+name, err)
			continue
		}
		info := s.CachedInfo()
		st.Streams = append(st.Streams, streamStatus{Name: name, Messages: info.State.Msgs, Bytes: info.State.Bytes,
			FirstSeq: info.State.FirstSeq, LastSeq: info.State.LastSeq, LastTime: info.State.LastTime, Consumers: info.State.Consumers})
		lister := s.ListConsumers(ctx)
		for ci := range lister.Info() {
			cs := consumerStatus{Stream: name, Name: ci.Name, Pending: ci.NumPending, AckPending: ci.NumAckPending,
				Redelivered: ci.NumRedelivered, Waiting: ci.NumWaiting, AckFloor: ci.AckFloor.Stream, LastActive: ci.Delivered.Last}
			st.Consumers = append(st.Consumers, cs)
			switch {
			case name == n.InboundStream() && ci.Name == n.WorkerConsumer():
				st.Workers.WaitingPulls = ci.NumWaiting
			case name == n.EventsStream() && ci.Name == n.RecorderConsumer():
				st.Recorder = &recorderStatus{Pending: ci.NumPending, AckPending: ci.NumAckPending,
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
		if name == n.EventsStream() && recent > 0 && info.State.Msgs > 0 {
			st.Workers.Recent, st.Workers.ScannedEvent = recentWorkers(ctx, js, name, info.State.LastSeq, recent, fail)
		}
	}
	st.Workers.RunningTurns = runningTurns(ctx, js, n, fail)
	st.Interceptors = discoverInterceptors(ctx, nc, n, fail)
	return st
}

// deadLetters counts the DLQ stream's messages by reason (the last
// subject token).
func deadLetters(ctx context.Context, s jetstream.Stream, n subjects.Names, fail func(string, error)) dlqStatus {
	out := dlqStatus{ByReason: map[string]uint64{}}
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

// recentWorkers scans the newest max events of the events stream (up to
// last) and counts them by worker instance, from the CloudEvent source
// /bub/worker/<instance>.
func recentWorkers(ctx context.Context, js jetstream.JetStream, stream string, last uint64, limit int, fail func(string, error)) ([]workerSeen, int) {
	start := uint64(1)
	if last > uint64(limit) {
		start = last - uint64(limit) + 1
	}
	// An ephemeral consumer, deleted at once after the scan (an ordered
	// consumer would linger in the consumer list for minutes).
	cons, err := js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: start,
		AckPolicy: jetstream.AckNonePolicy, MemoryStorage: true, InactiveThreshold: time.Minute,
		Description: "bub status: scanning recent events",
	})
	if err != nil {
		fail("scanning events", err)
		return nil, 0
	}
	defer func() { _ = js.DeleteConsumer(context.WithoutCancel(ctx), stream, cons.CachedInfo().Name) }()
	prefix := events.Source("worker", "")
	seen := map[string]*workerSeen{}
	runs := map[string]map[string]bool{}
	scanned := 0
	for scanned < limit {
		batch, err := cons.Fetch(min(limit-scanned, 500), jetstream.FetchMaxWait(time.Second))
		if err != nil {
			fail("scanning events", err)
			break
		}
		got := 0
		var lastSeq uint64
		for m := range batch.Messages() {
			got++
			scanned++
			if md, err := m.Metadata(); err == nil {
				lastSeq = md.Sequence.Stream
			}
			ev, err := events.Decode(m.Headers(), m.Data())
			if err != nil {
				continue
			}
			inst, ok := strings.CutPrefix(ev.Source(), prefix)
			if !ok {
				continue
			}
			w := seen[inst]
			if w == nil {
				w = &workerSeen{Instance: inst}
				seen[inst], runs[inst] = w, map[string]bool{}
			}
			w.Events++
			if t := ev.Time(); t.After(w.Last) {
				w.Last = t
			}
			if r := events.RunID(ev); r != "" && !runs[inst][r] {
				runs[inst][r] = true
				w.Runs++
			}
		}
		if got == 0 || lastSeq >= last {
			break
		}
	}
	out := make([]workerSeen, 0, len(seen))
	for _, k := range slices.Sorted(maps.Keys(seen)) {
		out = append(out, *seen[k])
	}
	return out, scanned
}

// discoverInterceptors asks every NATS micro service for its info and
// stats ($SRV.INFO, $SRV.STATS) and keeps the Bub interceptors: services
// with endpoints under bub.hook.>.
func discoverInterceptors(ctx context.Context, nc *nats.Conn, n subjects.Names, fail func(string, error)) []interceptorStatus {
	hookPrefix := strings.TrimSuffix(n.HookAll(), ">")
	infos := map[string]micro.Info{}
	for _, raw := range microAll(ctx, nc, micro.InfoVerb, fail) {
		var info micro.Info
		if json.Unmarshal(raw, &info) == nil && info.ID != "" {
			infos[info.ID] = info
		}
	}
	stats := map[string]micro.Stats{}
	for _, raw := range microAll(ctx, nc, micro.StatsVerb, fail) {
		var s micro.Stats
		if json.Unmarshal(raw, &s) == nil && s.ID != "" {
			stats[s.ID] = s
		}
	}
	var out []interceptorStatus
	for id, info := range infos {
		is := interceptorStatus{Service: info.Name, Version: info.Version, ID: id, Plugin: info.Metadata[interceptor.MetadataPlugin]}
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
	slices.SortFunc(out, func(a, b interceptorStatus) int {
		return cmp.Or(cmp.Compare(a.Service, b.Service), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// microAll sends one NATS micro discovery request of verb to every service
// and returns the replies that arrive within discoveryWait of the first.
func microAll(ctx context.Context, nc *nats.Conn, verb micro.Verb, fail func(string, error)) [][]byte {
	subj, err := micro.ControlSubject(verb, "", "")
	if err != nil {
		fail("micro discovery", err)
		return nil
	}
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		fail("micro discovery", err)
		return nil
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(subj, inbox, nil); err != nil {
		fail("micro discovery", err)
		return nil
	}
	var out [][]byte
	deadline := time.Now().Add(time.Second) // for the first reply
	for {
		wait, cancel := context.WithDeadline(ctx, deadline)
		msg, err := sub.NextMsgWithContext(wait)
		cancel()
		if err != nil {
			return out // no responders, or the window closed
		}
		out = append(out, msg.Data)
		if len(out) == 1 {
			deadline = time.Now().Add(discoveryWait)
		}
	}
}

// print renders the status as aligned tables.
func (st *status) print(w io.Writer) {
	fmt.Fprintf(w, "NATS %s (server %s, JetStream: %d streams, %d consumers, %s stored)\n",
		st.Server.URL, st.Server.Version, st.Server.Streams, st.Server.Consumers, bytesText(st.Server.Storage))

	fmt.Fprintln(w, "\nSTREAMS")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tMESSAGES\tBYTES\tFIRST\tLAST\tCONSUMERS\tLAST MESSAGE\t")
	for _, s := range st.Streams {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%s\t\n", s.Name, s.Messages, bytesText(s.Bytes), s.FirstSeq, s.LastSeq, s.Consumers, ago(s.LastTime))
	}
	_ = tw.Flush()

	fmt.Fprintln(w, "\nCONSUMERS")
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STREAM\tCONSUMER\tPENDING\tACK PENDING\tREDELIVERED\tWAITING\tLAST DELIVERY\t")
	for _, c := range st.Consumers {
		last := "-"
		if c.LastActive != nil {
			last = ago(*c.LastActive)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t\n", c.Stream, c.Name, c.Pending, c.AckPending, c.Redelivered, c.Waiting, last)
	}
	_ = tw.Flush()

	fmt.Fprintln(w, "\nWORKERS")
	running := 0
	for _, v := range st.Workers.RunningTurns {
		running += v
	}
	fmt.Fprintf(w, "  running turns (turn registry): %d", running)
	for _, owner := range slices.Sorted(maps.Keys(st.Workers.RunningTurns)) {
		fmt.Fprintf(w, "  %s=%d", owner, st.Workers.RunningTurns[owner])
	}
	fmt.Fprintf(w, "\n  pull requests waiting on the shared consumer: %d\n", st.Workers.WaitingPulls)
	fmt.Fprintf(w, "  instances in the last %d lifecycle events: %d\n", st.Workers.ScannedEvent, len(st.Workers.Recent))
	if len(st.Workers.Recent) > 0 {
		tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "    INSTANCE\tRUNS\tEVENTS\tLAST EVENT\t")
		for _, r := range st.Workers.Recent {
			fmt.Fprintf(tw, "    %s\t%d\t%d\t%s\t\n", r.Instance, r.Runs, r.Events, ago(r.Last))
		}
		_ = tw.Flush()
	}

	fmt.Fprintln(w, "\nINTERCEPTORS (NATS micro)")
	if len(st.Interceptors) == 0 {
		fmt.Fprintln(w, "  none running")
	} else {
		tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  SERVICE\tVERSION\tINSTANCE\tHOOKS\tREQUESTS\tERRORS\tAVG TIME\tUP")
		for _, is := range st.Interceptors {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", is.Service, is.Version, is.ID, strings.Join(is.Hooks, ","),
				is.Requests, is.Errors, is.Average.Round(time.Microsecond), since(is.Started))
		}
		_ = tw.Flush()
	}

	fmt.Fprintln(w, "\nRECORDER")
	if r := st.Recorder; r != nil {
		fmt.Fprintf(w, "  lag: %d events not yet committed (%d not yet delivered, %d delivered and held", r.Lag, r.Pending, r.AckPending)
		if r.OldestHeld > 0 {
			fmt.Fprintf(w, "; the oldest is %d behind the stream head", r.OldestHeld)
		}
		fmt.Fprintln(w, ")")
	} else {
		fmt.Fprintln(w, "  no recorder consumer")
	}

	fmt.Fprintln(w, "\nDEAD LETTERS")
	fmt.Fprintf(w, "  %d", st.DeadLetters.Messages)
	for _, r := range slices.Sorted(maps.Keys(st.DeadLetters.ByReason)) {
		fmt.Fprintf(w, "  %s=%d", r, st.DeadLetters.ByReason[r])
	}
	fmt.Fprintln(w)
	for _, e := range st.Errors {
		fmt.Fprintln(w, "\nwarning:", e)
	}
}

func bytesText(b uint64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}

// ago renders how long ago t was ("-" for the zero time).
func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return since(t) + " ago"
}

func since(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := time.Since(t)
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}
