// Package jsonesc writes Go strings and numbers as JSON literals in the
// style of another encoder, for the packages that write JSON by hand to
// match the bytes that encoder writes: pkg/events (the CloudEvents SDK's
// jsoniter), pkg/tape (Python's json.dumps) and the interceptor protocol
// of pkg/hooks/remote (encoding/json, written by hand for speed). Numbers
// are written as encoding/json writes a float64 ([AppendFloat]).
package jsonesc
