// Package workercmd is the worker service as cmd/worker, `bub worker` and
// the bub commands that run turns (up, run, chat, hooks) use it: its
// flags ([Bind], [Load]), its [service.Spec] ([Service]), its turn runtime
// on a connection ([NewRuntime]) and the service itself ([Run]: remote
// interceptors, admission gate, consumer, dead-letter watch, drain).
//
// The worker links the model providers (pkg/llm/providers: echo, OpenAI,
// Anthropic) and nothing of the CLI: no bench harness, no fake model
// servers, no embedded nats-server (internal/depsrule holds that). The
// echo model is the one stand-in a worker can select (BUB_MODEL=echo:…);
// the scripted fake model (`bub fakellm`) is a bub command only.
//
// Looking for the turn itself? See internal/worker. For the shell around
// it see internal/service.
package workercmd
