// Package depsrule holds the rule of what each binary links, as a test
// over `go list -deps` (deps_test.go): the service binaries (cmd/worker,
// cmd/ingress, cmd/recorder, cmd/gateway) link their service and no
// developer tool — no embedded nats-server, bench harness, fake model
// server, CLI command tree or in-process stack, which only cmd/bub and
// pkg/app reach — and no other service; ingress, recorder and gateway
// link no model provider (openai-go, anthropic-sdk-go).
//
// It has no code: the rule lives in its test. Looking for the shell the
// services share? See internal/service.
package depsrule
