// Package bench is the load harness behind `bub bench` and `make bench`:
// it measures every performance figure of the project beside its limit
// measured in the same run, and renders the table of BENCHMARKS.md.
//
// Entry points: [Run] measures the figures selected by [Options] and
// returns a [Report]; [Report.WriteMarkdown] writes it. [Serve] is the
// hidden `bub bench --serve ROLE` mode: the harness starts the NATS server
// (`bub up --services=`), the interceptor host, benchmark workers and the
// bare-nats.go simulation's roles as separate processes of the same binary,
// beside the real service binaries (bin/worker, bin/recorder,
// bin/ingress).
//
// The figures (ids for --only):
//
//   - P1 in-process hook dispatch (testing.Benchmark, absolute goal).
//   - P2 one remote interceptor hop to another process beside raw nats.go
//     request/reply of the same bytes.
//   - P3 pipeline turns/s (ingress gateway → worker → recorder, echo model,
//     two interceptor hops, fully recorded) beside a bare nats.go
//     simulation of the same message pattern, measured on the real turn in
//     the same run (sim.go).
//   - P4 latency at a fixed 200 turns/s, HTTP in → outbound, beside the
//     simulation at the same rate.
//   - P5 context read on a 100k-entry tape beside a 100-entry one.
//   - P3·js the JetStream messages and bytes stored per turn (all
//     streams and buckets, from their state around each P3 window) beside
//     the simulation's (stored.go).
//   - P6 worker RSS with 1,000 turns in flight on a slow streaming model
//     over HTTPS with HTTP/2 (the worker trusts the fake provider's
//     certificate through SSL_CERT_FILE); P6·h1 the same over HTTP/1.1.
//   - P7 CloudEvent encode+publish through the events Bridge beside
//     MarshalJSON + raw publish.
//   - P8 time to first token: the fake model's first streamed delta to an
//     SSE client of GET /v1/sessions/{s}/events, 50 concurrent streams
//     spread over about one turn, beside a bare SSE relay process of the
//     same model stream.
//   - UP the all-in-one layout (`bub up`) P3 and P4; SCALE turns/s with 1,
//     2 and 4 worker processes, and a model of scaling across machines
//     from the CPU each process spends per turn.
//   - CLUSTER P3 and P4 on a 3-node cluster (nats-server processes on
//     loopback, R3 streams) beside the simulation on the same cluster;
//     SYNC P3 on a server with BUB_JS_SYNC=always (cluster.go); CPU1 P3
//     and P4 with GOMAXPROCS=1 in every process. These, UP and SCALE are
//     full-run only (not in --quick).
//
// Every figure excludes a warm-up, interleaves its repetitions with the
// limit's (at least 3), and reports min–median–max; the verdict is on the
// median of the per-repetition ratio. Load runs on 127.0.0.1 only and is
// bounded in count and time.
//
// P1 and P5 run the packages' own benchmark functions (hookstest's
// dispatch benchmarks, tapetest's context read) through
// testing.Benchmark, the same ones `go test -bench` runs. Only the bub CLI
// reaches this package (internal/depsrule keeps it out of the service
// binaries).
//
// Looking for the Go micro-benchmarks? They are *_test.go benchmarks in
// pkg/hooks, pkg/hooks/remote, pkg/events and pkg/tape (`make bench-go`).
package bench
