// Package recordercmd is the recorder service as cmd/recorder, `bub
// recorder` and `bub up` run it: its [service.Spec] ([Service]) and how it
// runs on a connection ([Run]: the topology, the tape store of the
// builtin plugin and the build's plugins, and the recorder). [WithTapeStore]
// opens that same store for `bub tape`.
//
// Looking for how events become tape entries? See internal/recorder and
// pkg/taperec. For the shell around it see internal/service.
package recordercmd
