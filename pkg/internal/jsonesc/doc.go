// Package jsonesc writes Go strings as JSON string literals in the
// escaping of another encoder, for the packages that write JSON by hand
// to match bytes that encoder wrote: pkg/events (the CloudEvents SDK's
// jsoniter) and pkg/tape (Python's json.dumps). encoding/json has no
// such choices and is used everywhere else.
package jsonesc
