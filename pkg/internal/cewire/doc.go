// Package cewire writes the attributes of a structured-mode CloudEvents
// 1.0 JSON event by hand, for the two hot paths that write events without
// building an SDK event: lifecycle events (pkg/events, the bridge's fast
// path) and tape entries (pkg/tape, which sits below pkg/events). Both
// write the head — specversion, id, source, type, subject, datacontenttype
// and time, in the SDK's order — with [AppendHead], and each extension
// with [AppendAttr]; where the data goes and which extensions follow is
// theirs.
package cewire
