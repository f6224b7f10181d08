// Package service is the shell every Bub service runs in: the common
// flags bound to BUB_* variables, validation, the logged configuration,
// telemetry, the NATS connection and its drain. A service is a [Spec]
// (its name, its own flags and how it runs on a [Conn]); [Run] runs one.
//
// The service binaries and the bub CLI run the same Spec through the same
// Run, so `worker` and `bub worker` have the same flags, environment
// variables and behaviour: cmd/worker is [Main] over the worker's Spec,
// and `bub worker` is a cobra command over it (internal/bubcmd). Signals
// become context cancellation in cli.Main; the service then drains.
//
// A service always dials an existing cluster ([Dial], [ErrNoURL] without
// one): the embedded server, the bench harness, the fake models and the
// CLI's command tree stay behind cmd/bub and pkg/app, so a service binary
// links its service only (internal/depsrule holds that).
//
// Every service run through [Run] (and each one `bub up` runs, see
// internal/stack) is announced as a NATS micro service ([Conn.Announce]):
// <prefix>-<name> with the build's version, its instance in the metadata,
// and a status endpoint whose details the service reports with
// [Conn.ReportStatus]; [Conn.Close] stops it.
//
// Looking for the services' Specs? See internal/workercmd,
// internal/ingresscmd, internal/recordercmd and internal/gatewaycmd. For
// several services in one process (`bub up`) see internal/stack.
package service
