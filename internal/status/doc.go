// Package status reads the state of a Bub deployment as NATS sees it: the
// streams (its KV buckets' too) and consumers, the workers (each a NATS
// micro service instance, see [WorkerInstance]), the interceptor services
// with their NATS micro statistics, the recorder's lag and the dead
// letters ([Collect]); and the hook report of a running worker ([AskHooks], which
// a worker answers with [ServeHooks]). It also holds the wire contract
// of a service's status endpoint ([ServiceStatus] and the metadata keys),
// which internal/service serves and [Collect] reads.
//
// Both `bub status` (internal/bubcmd, which renders a [Status] as tables)
// and the ingress's JSON read API and web console (internal/ingress) use
// it, so the two always show the same figures. Looking for how interceptor
// services are discovered? See [remote.Discover] in pkg/hooks/remote.
package status
