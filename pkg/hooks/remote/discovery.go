package remote

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// Discover sends one NATS micro discovery request of verb ($SRV.INFO,
// $SRV.STATS, …) to every instance of service, or of every service when
// service is "", and returns the replies: the first must arrive within
// first, further ones are collected for window after it. With no service
// running it returns no replies and no error; no reply within first is an
// error. It is the one discovery of the module: a [Plugin] finds its
// service's instances with it, and `bub status` and the ingress console
// the interceptors and their statistics.
func Discover(ctx context.Context, nc *nats.Conn, verb micro.Verb, service string, first, window time.Duration) ([][]byte, error) {
	subj, err := micro.ControlSubject(verb, service, "")
	if err != nil {
		return nil, err
	}
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(subj, inbox, nil); err != nil {
		return nil, err
	}
	wait, cancel := context.WithTimeout(ctx, first)
	defer cancel()
	var out [][]byte
	for {
		msg, err := sub.NextMsgWithContext(wait)
		switch {
		case errors.Is(err, nats.ErrNoResponders):
			return out, nil
		case err != nil && len(out) > 0 && errors.Is(err, context.DeadlineExceeded):
			return out, nil // the window closed
		case err != nil:
			return nil, err
		}
		if out = append(out, msg.Data); len(out) == 1 {
			var wcancel context.CancelFunc
			wait, wcancel = context.WithTimeout(ctx, window)
			defer wcancel()
		}
	}
}
