// Package interceptor hosts an in-process [hooks.Plugin] as a Bub
// interceptor service: a NATS micro service with one endpoint per hook,
// which any Bub worker configured with the service name (BUB_INTERCEPTORS)
// calls over request/reply.
//
// Start with [Serve]. It discovers the hooks the plugin implements
// ([hooks.HooksOf], limited to [remote.Hooks]), adds an endpoint
// bub.hook.<service>.<hook> for each under the micro group
// bub.hook.<service>, with the service name as queue group so that several
// instances share the load, and returns a [Service] to [Service.Stop]. An
// endpoint handles its requests one at a time; [WithConcurrency] serves
// the plugin as several instances in one process.
// NATS micro gives discovery ($SRV.INFO, which workers use to learn the
// hooks), statistics ($SRV.STATS) and ping for free, so `nats micro ls`
// and `nats micro stats` work on interceptors.
//
// Each request runs with a fresh context carrying the caller's deadline
// (Bub-Deadline header) and, with [WithTraceContext], its trace context.
// The plugin's answer is sent in the remote package's decision vocabulary;
// an error or a recovered panic becomes an error reply (NATS micro error
// headers plus an {"error": {kind, message}} body), so a *bub.Error keeps
// its kind across the hop.
//
// Looking for the client side, the wire protocol or failure policies? See
// package remote and docs/interceptors.md. For a complete service see
// examples/interceptors/policy.
package interceptor
