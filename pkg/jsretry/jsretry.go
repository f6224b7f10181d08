package jsretry

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStream error codes of changes that are momentarily impossible (the
// jetstream package names the others, a concurrent create that won).
const (
	errCodeMemberChangeInflight  jetstream.ErrorCode = 10202
	errCodeReconfigureInProgress jetstream.ErrorCode = 10226
	// a consumer scaled before its stream's concurrent scale-up is seen
	errCodeReplicasExceedStream jetstream.ErrorCode = 10126
	// an atomic batch the server dropped before its commit (its stream's
	// leader changed half-way), and one refused while too many batches
	// are open on the stream: sent again as a new batch, it may succeed
	errCodeBatchIncomplete      jetstream.ErrorCode = 10176
	errCodeBatchTooManyInflight jetstream.ErrorCode = 10210
)

// Transient reports whether err is worth retrying while a cluster elects
// leaders, a server leaves (the connection moves to another) or several
// services update the topology at once: timeouts, a dropped connection,
// no responders, no response from the stream, JetStream 503s,
// "already in progress", and an atomic batch dropped half-way or refused
// for too many open batches.
func Transient(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrDisconnected) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case jetstream.JSErrCodeStreamNameInUse, jetstream.JSErrCodeConsumerExists, jetstream.JSErrCodeConsumerAlreadyExists, errCodeMemberChangeInflight, errCodeReconfigureInProgress, errCodeReplicasExceedStream,
			errCodeBatchIncomplete, errCodeBatchTooManyInflight:
			return true
		}
		return apiErr.Code == 503
	}
	return false
}

// Backoff is a retry policy: the first wait, doubled after each attempt
// up to Max, each wait jittered to 0.5–1.5 × its value.
type Backoff struct {
	First, Max time.Duration
}

// Do runs op until it succeeds, fails with an error that is not
// [Transient], ctx ends or the next attempt would start after deadline,
// and returns op's last error. Before each wait it calls onRetry (when
// not nil) with the attempt that failed, the wait and the error.
func (b Backoff) Do(ctx context.Context, deadline time.Time, onRetry func(attempt int, wait time.Duration, err error), op func(context.Context) error) error {
	for attempt := 1; ; attempt++ {
		err := op(ctx)
		if err == nil || !Transient(err) || ctx.Err() != nil {
			return err
		}
		sleep := b.Wait(attempt)
		if time.Now().Add(sleep).After(deadline) {
			return err
		}
		if onRetry != nil {
			onRetry(attempt, sleep, err)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(sleep):
		}
	}
}

// Sleep waits [Backoff.Wait](n), or until ctx ends, and then returns
// ctx's error.
func (b Backoff) Sleep(ctx context.Context, n int) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(b.Wait(n)):
		return nil
	}
}

// Wait is the jittered wait after failed attempt n (1 = the first):
// First doubled n-1 times, at most Max, times 0.5–1.5.
func (b Backoff) Wait(n int) time.Duration {
	wait := b.First
	for i := 1; i < n && wait < b.Max; i++ {
		wait = min(2*wait, b.Max)
	}
	return wait/2 + rand.N(wait)
}

// A long-running pull (jetstream.Consumer.Messages) parks its pull
// request on the consumer's leader, which sends a heartbeat every
// PullHeartbeat while it holds it. When that server is lost the request
// is gone with it, and the client learns so only from two missed
// heartbeats: then it pulls again, from the new leader. nats.go's default
// heartbeat is half of the 30s expiry, so a pull noticed a leader change
// only after 30s; with these the pull is renewed every PullExpiry and a
// lost leader is noticed within 2 × PullHeartbeat.
const (
	PullExpiry    = 5 * time.Second
	PullHeartbeat = 500 * time.Millisecond
)

// PullOptions are the options of a long-running pull with up to
// maxMessages in flight that rides out consumer leader changes (see
// [PullHeartbeat]).
func PullOptions(maxMessages int) []jetstream.PullMessagesOpt {
	return []jetstream.PullMessagesOpt{
		jetstream.PullMaxMessages(maxMessages),
		jetstream.PullExpiry(PullExpiry),
		jetstream.PullHeartbeat(PullHeartbeat),
	}
}

// ReadBound bounds how long [Read] retries: longer than a stream leader
// election after a server loss (nats-server's election timeout is 4–9s).
// ReadAttempt bounds each attempt: a request to a leader that is gone is
// not answered, and would otherwise use the JetStream API's 5s default.
// It is also what an attempt sent just before the new leader is elected
// adds to the recovery, so it is short: a JetStream request on a healthy
// cluster is answered in milliseconds, and a slower one is only asked
// again.
const (
	ReadBound   = 15 * time.Second
	ReadAttempt = time.Second
)

// readBackoff is the pace of [Read] (and of [Follow] making its consumer
// again).
var readBackoff = Backoff{First: 10 * time.Millisecond, Max: 250 * time.Millisecond}

// Read runs a read (or an idempotent write) op, retrying transient
// errors from 10ms doubling to 250ms, each attempt within [ReadAttempt],
// for up to [ReadBound]: it rides out a leader election.
func Read(ctx context.Context, op func(context.Context) error) error {
	return readBackoff.Do(ctx, time.Now().Add(ReadBound), nil, func(ctx context.Context) error {
		actx, cancel := context.WithTimeout(ctx, ReadAttempt)
		defer cancel()
		return op(actx)
	})
}

// Consumer binds the durable consumer name on stream through [Read]: a
// service that starts, or binds again, while its server is in lame-duck
// mode, its connection moves or the consumer's leader is being elected
// gets the consumer once the cluster answers, not a failed start.
func Consumer(ctx context.Context, js jetstream.JetStream, stream, name string) (jetstream.Consumer, error) {
	var cons jetstream.Consumer
	err := Read(ctx, func(ctx context.Context) (err error) {
		cons, err = js.Consumer(ctx, stream, name)
		return err
	})
	return cons, err
}
