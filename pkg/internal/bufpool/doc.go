// Package bufpool reuses byte buffers between encodings on hot paths:
// remote hook requests (pkg/hooks/remote, whose buffer is reused once its
// request returned, as NATS copies a message's data when it publishes
// it) and tape messages (pkg/tape, encoded into a pooled buffer and
// copied out at their exact size). A buffer that grew past 64 KiB is not
// kept, so an occasional large message does not pin its buffer.
package bufpool
