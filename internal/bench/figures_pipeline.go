package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
)

// distResult is what the distributed layout measured.
type distResult struct {
	main, scale []Row
	cpu         cpuTable
	scaleRates  []float64 // median turns/s with 1, 2, 4 workers
	pattern     simParams
	extra       string // markdown: what a real turn does beyond the pattern
}

const p3Figure = "pipeline turns/s: ingress gateway → bin/worker → bin/recorder; echo model, 2 interceptor hops (separate process), fully recorded"

// runDistributed measures P3, P4 and the worker scaling in the
// distributed layout.
func runDistributed(ctx context.Context, e *env, doP3, doP4, doScale bool) (res distResult, err error) {
	pl, err := startPipeline(ctx, e, distributed, doP4, layoutOpts{})
	if err != nil {
		return res, err
	}
	defer pl.close()
	res.pattern, res.extra = pl.params, pl.extraMarkdown()
	if doP3 {
		row, cpu, err := pl.p3(ctx, "P3", p3Figure, nil)
		if err != nil {
			return res, err
		}
		res.main = append(res.main, row)
		res.main = append(res.main, pl.stored.rows("P3·js")...)
		res.cpu = cpu
		if doScale {
			s := scaleRow(row, 1)
			res.scale = append(res.scale, s)
			res.scaleRates = append(res.scaleRates, s.Value.Median)
		}
	}
	if doP4 {
		rows, err := pl.p4(ctx, "P4", "turn latency at 200 turns/s, HTTP in → outbound (bin/ingress → worker → reply in the response)")
		if err != nil {
			return res, err
		}
		res.main = append(res.main, rows...)
	}
	if doScale {
		if !doP3 {
			row, cpu, err := pl.p3(ctx, "S1", p3Figure, nil)
			if err != nil {
				return res, err
			}
			res.cpu = cpu
			s := scaleRow(row, 1)
			res.scale = append(res.scale, s)
			res.scaleRates = append(res.scaleRates, s.Value.Median)
		}
		for _, n := range []int{2, 4} {
			e.progress.Show(fmt.Sprintf("SCALE: starting %d worker and %d sim worker processes", n, n))
			if err := pl.addWorkers(ctx, n-pl.workers, true); err != nil {
				return res, err
			}
			row, _, err := pl.p3(ctx, fmt.Sprintf("S%d", n), p3Figure, nil)
			if err != nil {
				return res, err
			}
			s := scaleRow(row, n)
			res.scale = append(res.scale, s)
			res.scaleRates = append(res.scaleRates, s.Value.Median)
		}
	}
	return res, nil
}

// scaleRow turns a P3 row into a row of the scaling table.
func scaleRow(r Row, workers int) Row {
	r.ID = fmt.Sprintf("S%d", workers)
	plural := "es"
	if workers == 1 {
		plural = ""
	}
	r.Figure = fmt.Sprintf("turns/s with %d worker process%s", workers, plural)
	r.LimitName = fmt.Sprintf("the simulation with %d sim worker process%s", workers, plural)
	r.Goal = ""
	if r.Result != Fail || r.Extra == "" {
		r.Result = Info
	}
	return r
}

// variant is P3, and P4 unless it has no p4, measured again in another
// layout or setting, the simulation in the same one: rows P3·<id> and
// P4·<id>.
type variant struct {
	id     string
	layout string
	opts   layoutOpts
	p3, p4 string // the figures' descriptions
	stored bool   // with P3's stored messages and bytes (P3·<id>·js)
}

// The variants: `bub up`'s layout (UP), a 3-node cluster with R3 streams
// (CLUSTER), a server that fsyncs every write (SYNC), and every process
// the harness starts limited to one CPU's worth of Go scheduler (CPU1).
var (
	allInOneVariant = variant{id: "up", layout: allInOne,
		p3: "pipeline turns/s, all services in one process (echo model, 2 interceptor hops, recorder on)",
		p4: "turn latency at 200 turns/s, HTTP in → outbound, all services in one process"}
	clusterVariant = variant{id: "R3", layout: distributed, opts: layoutOpts{cluster: true}, stored: true,
		p3: "pipeline turns/s on a 3-node cluster, R3 streams (as P3)",
		p4: "turn latency at 200 turns/s on a 3-node cluster, R3 streams (as P4)"}
	syncVariant = variant{id: "sync", layout: distributed, opts: layoutOpts{jsSync: "always"},
		p3: "pipeline turns/s with BUB_JS_SYNC=always (the server fsyncs every write; P3 is the default, 2m)"}
	oneCPUVariant = variant{id: "1cpu", layout: distributed, opts: layoutOpts{procs: 1},
		p3: "pipeline turns/s with GOMAXPROCS=1 in every process (as P3)",
		p4: "turn latency at 200 turns/s with GOMAXPROCS=1 in every process (as P4)"}
)

// run measures v: its rows, and the CPU per turn of each process during
// its P3.
func (v variant) run(ctx context.Context, e *env) ([]Row, cpuTable, error) {
	pl, err := startPipeline(ctx, e, v.layout, v.p4 != "", v.opts)
	if err != nil {
		return nil, cpuTable{}, err
	}
	defer pl.close()
	row, cpu, err := pl.p3(ctx, "P3·"+v.id, v.p3, nil)
	if err != nil {
		return nil, cpuTable{}, err
	}
	rows := []Row{row}
	if v.stored {
		rows = append(rows, pl.stored.rows("P3·"+v.id+"·js")...)
	}
	if v.p4 == "" {
		return rows, cpu, nil
	}
	p4, err := pl.p4(ctx, "P4·"+v.id, v.p4)
	return append(rows, p4...), cpu, err
}

// scalingModel writes the section on scaling across machines from the
// CPU per turn of each role and the bytes each turn stores.
func scalingModel(cpu cpuTable, p simParams, rows []Row, scale []float64) string {
	var b strings.Builder
	var rate float64
	for _, r := range rows {
		if r.ID == "P3" {
			rate = r.Value.Median
		}
	}
	us := func(ns float64) string { return fmt.Sprintf("%.0f µs", ns/1e3) }
	perCore := func(ns float64) string {
		if ns <= 0 {
			return "—"
		}
		return fmt.Sprintf("%.0f", 1e9/ns)
	}
	total, simTotal := cpu.total(true), cpu.total(false)
	if rate > 0 && total > 0 {
		busy := rate * total / 1e9
		fmt.Fprintf(&b, "On this machine P3 reached %.0f fully recorded turns/s with %s of CPU per turn across all processes (the simulation: %s), "+
			"i.e. %.1f of %d cores busy with the pipeline's processes. ", rate, us(total), us(simTotal), busy, ThisMachine().CPUs)
		if busy < 0.8*float64(ThisMachine().CPUs) {
			b.WriteString("Less than the machine: either other processes held the rest (see the load average above) or turns wait " +
				"rather than compute (serialized JetStream API requests, round trips).\n\n")
		} else {
			b.WriteString("The cores are the wall here: every role shares them.\n\n")
		}
	}
	stored := p.InboundBytes + p.Events*p.EventBytes + p.OutboundBytes + p.TapeMsgs*p.TapeBytes
	msgs := 2 + p.Events + p.TapeMsgs
	type role struct {
		name, scales string
		ns           float64
	}
	roles := []role{
		{"NATS server", fmt.Sprintf("JetStream stores ≥ %d messages (%.1f KiB) per turn plus KV updates; a bigger server first, then more streams/servers (each stream has one leader that takes all its writes)", msgs, float64(stored)/1024), cpu.real[lblServer]},
		{"worker", "stateless, one shared work-queue consumer: add processes or machines", cpu.real[lblWorker]},
		{"recorder", "the only tape writer: one process, 16 lanes by session use several cores; beyond one machine it needs sharding by session", cpu.real[lblRecorder]},
		{"interceptor", "each endpoint serves one request at a time; more instances join the queue group", cpu.real[lblInterceptor]},
	}
	b.WriteString("| role | CPU per turn (measured) | turns/s one core sustains | how it scales |\n| --- | --- | --- | --- |\n")
	for _, r := range roles {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", r.name, us(r.ns), perCore(r.ns), r.scales)
	}
	// Disk: JetStream file storage writes every stored byte once (plus
	// indexes); the figure is the write bandwidth a rate needs.
	fmt.Fprintf(&b, "| disk | %.1f KiB written per turn | — | %.1f MiB/s at 1,000 turns/s, before indexes and compaction |\n\n",
		float64(stored)/1024, float64(stored)*1000/(1<<20))

	slices.SortFunc(roles, func(a, b role) int { return int(math.Copysign(1, b.ns-a.ns)) })
	byCost := make([]string, 0, len(roles))
	for _, r := range roles {
		if r.ns > 0 {
			byCost = append(byCost, fmt.Sprintf("%s (%s)", r.name, us(r.ns)))
		}
	}
	fmt.Fprintf(&b, "The model: a turn costs each role a fixed CPU time, so a role with k cores sustains k × (turns/s per core) "+
		"and the deployment's rate is the smallest of those. By cost per turn: %s.\n\n", strings.Join(byCost, " > "))
	fmt.Fprintf(&b, "- **One machine** (like this one): all roles share the cores and the rate is about cores ÷ total CPU per turn (%s here).\n", us(total))
	fmt.Fprintf(&b, "- **Workers on their own machines**: workers scale out linearly (no shared state but the work queue); "+
		"the next wall is the single NATS server, at about %s turns/s per server core, then the recorder at about %s turns/s per core it gets "+
		"— whichever of the two is given fewer cores saturates first. The disk is rarely first: %.0f MiB/s covers 1,000 turns/s.\n",
		perCore(cpu.real[lblServer]), perCore(cpu.real[lblRecorder]), float64(stored)*1000/(1<<20))
	b.WriteString("- **Beyond one server**: JetStream stream leaders spread over a cluster (inbound, events, tapes, outbound are separate streams, so up to four servers share the writes); the recorder then needs one consumer per session shard (filtered subjects), which the subject layout `<prefix>.events.<session>.…` already allows.\n")
	if len(scale) == 3 && scale[0] > 0 {
		fmt.Fprintf(&b, "\nWorker processes on this 2-core machine: 1 → %.0f, 2 → %.0f (%+.0f%%), 4 → %.0f turns/s (%+.0f%%). "+
			"They compete for the same cores as the server and the recorder, so extra processes here measure contention for the "+
			"cores and the work queue, not scale-out (and each later window runs on the larger streams and buckets the earlier ones left).\n", scale[0], scale[1], 100*(scale[1]/scale[0]-1), scale[2], 100*(scale[2]/scale[0]-1))
	}
	return b.String()
}
