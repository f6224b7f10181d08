// Package telemetrytest installs recording OpenTelemetry providers as the
// global ones for one test, for tests of code that traces and measures
// through the global providers (internal/telemetry, the interceptor
// service).
package telemetrytest
