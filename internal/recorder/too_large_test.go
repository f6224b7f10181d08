package recorder_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/recorder"
)

// TestRunLargerThanMaxPayloadIsInterrupted: a run whose tape entries the
// server no longer takes (its max_payload was lowered to 16 KiB after the
// run's events, with a 40 KiB reply, were stored) cannot be committed
// however often it is retried. The recorder records it as interrupted,
// with reason payload_too_large and an error that names the entry's size
// and the server's max_payload, and acknowledges its events, instead of
// retrying the commit forever while the session's watermark, and so every
// later turn of the session, waits; the session's next run is recorded.
func TestRunLargerThanMaxPayloadIsInterrupted(t *testing.T) {
	s := natstest.Start(t)
	f := setupOn(t, s)
	const session = "s-large"
	f.publish(t, newRun(session, "env-large", 1, "hi", strings.Repeat("r", 40<<10)), []int{0, 1, 2, 3, 4}, map[int]string{}, false)

	f = setupOn(t, s.RestartWith(t, func(o *server.Options) { o.MaxPayload = 16 << 10 }))
	f.startRecorder(t, recorder.Config{})
	entries := f.settled(t, session)
	if got := kinds(entries); got != "event:run.interrupted" {
		t.Fatalf("tape = %s\nwant  event:run.interrupted", got)
	}
	data, _ := entries[0].Payload["data"].(map[string]any)
	msg := fmt.Sprint(data["error"])
	if data["reason"] != "payload_too_large" || !strings.Contains(msg, "max_payload (16384 bytes)") || !strings.Contains(msg, "is 4") {
		t.Errorf("interruption %v, want reason payload_too_large and an error naming the entry's size and max_payload (16384 bytes)", data)
	}
	f.waitRecorderConsumer(t, 5*time.Second, func(info *jetstream.ConsumerInfo) (bool, string) {
		return info.NumAckPending == 0 && info.NumPending == 0, fmt.Sprintf("ack pending %d, pending %d, want 0", info.NumAckPending, info.NumPending)
	})

	f.publish(t, newRun(session, "env-next", 2, "hi", "hello"), []int{0, 1, 2, 3, 4}, map[int]string{}, false)
	if got := kinds(f.settled(t, session)); got != "event:run.interrupted "+oneRun {
		t.Fatalf("tape = %s\nwant  event:run.interrupted %s", got, oneRun)
	}
}
