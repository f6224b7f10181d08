package bubcmd

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/proctest"
)

// TestTailPrintsOneLinePerEvent: `bub events` prints each message on one
// line, in both forms, whatever its publisher did: data spanning lines is
// escaped (readable form) or compacted (--json), and an event whose data
// is not the JSON its content type says is reported as undecodable
// instead of printed as invalid JSON.
func TestTailPrintsOneLinePerEvent(t *testing.T) {
	srv := natstest.Start(t)
	nc := srv.Conn(t)
	msgs := []*nats.Msg{
		{Subject: "bub.events.s", Header: nats.Header{"Content-Type": {"application/cloudevents+json"}},
			Data: []byte("{\"specversion\":\"1.0\",\"id\":\"1\",\"source\":\"/p\",\"type\":\"dev.bub.turn.started.v1\",\"datacontenttype\":\"application/json\",\"data\":{\n  \"a\": 1\n}}")},
		{Subject: "bub.events.s", Header: nats.Header{"Ce-Specversion": {"1.0"}, "Ce-Id": {"2"}, "Ce-Source": {"/p"}, "Ce-Type": {"t"}, "Content-Type": {"text/plain"}},
			Data: []byte("two\nlines")},
		{Subject: "bub.events.s", Header: nats.Header{"Ce-Specversion": {"1.0"}, "Ce-Id": {"3"}, "Ce-Source": {"/p"}, "Ce-Type": {"t"}, "Content-Type": {"application/json"}},
			Data: []byte("A")},
	}
	for _, asJSON := range []bool{false, true} {
		var out proctest.Buffer
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- tail(ctx, nc, "bub.events.>", asJSON, &out) }()
		// The subscription is in place once a probe reaches tail.
		natstest.Eventually(t, 5*time.Second, func() (bool, string) {
			if err := nc.Publish("bub.events.probe", []byte("{}")); err != nil {
				t.Fatal(err)
			}
			_ = nc.Flush()
			time.Sleep(20 * time.Millisecond)
			return strings.Contains(out.String(), "bub.events.probe"), "tail does not print yet"
		})
		start := strings.Count(out.String(), "\n")
		for _, m := range msgs {
			if err := nc.PublishMsg(m); err != nil {
				t.Fatal(err)
			}
		}
		natstest.Eventually(t, 5*time.Second, func() (bool, string) {
			return strings.Count(out.String(), "\n")-start >= len(msgs), out.String()
		})
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")[start:]
		if len(lines) != len(msgs) {
			t.Fatalf("json=%v: %d lines for %d events:\n%s", asJSON, len(lines), len(msgs), out.String())
		}
		if !strings.HasPrefix(lines[2], "undecodable event on bub.events.s") && asJSON {
			t.Errorf("json=%v: an event with invalid JSON data printed as %q", asJSON, lines[2])
		}
		for i, line := range lines[:2] {
			if asJSON && !json.Valid([]byte(line)) {
				t.Errorf("json line %d is not JSON: %q", i, line)
			}
			if !asJSON && (!strings.Contains(line, `\n`) || strings.Contains(line, "undecodable")) {
				t.Errorf("line %d %q: want the data with its line breaks escaped", i, line)
			}
		}
	}
}
