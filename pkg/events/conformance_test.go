package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cloudevents/sdk-go/v2/binding"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/pkg/subjects"
)

// checkCloudEvent decodes a NATS message as the CloudEvents SDK does, with
// no help from package events: its HTTP binding reads the message's
// headers and body (structured mode by Content-Type, binary mode by ce-*
// headers), then the event must pass the SDK's Validate.
func checkCloudEvent(header nats.Header, body []byte) error {
	h := make(http.Header, len(header))
	for k, v := range header {
		h[textproto.CanonicalMIMEHeaderKey(k)] = v
	}
	msg := cehttp.NewMessage(h, io.NopCloser(strings.NewReader(string(body))))
	if msg.ReadEncoding() == binding.EncodingUnknown {
		return errors.New("neither structured mode (Content-Type application/cloudevents+json) nor binary mode (ce-* headers)")
	}
	ev, err := binding.ToEvent(context.Background(), msg)
	if err != nil {
		return fmt.Errorf("decoding: %w", err)
	}
	if err := ev.Validate(); err != nil {
		return fmt.Errorf("validating: %w", err)
	}
	if !json.Valid(ev.Data()) {
		return fmt.Errorf("data of %s is not JSON", ev.Type())
	}
	return nil
}

// exempt reports whether subj is one of the documented exceptions to
// "every message on a bub. subject is a CloudEvent" (docs/events/README.md):
// token deltas and interceptor request/reply.
func exempt(names subjects.Names, subj string) bool {
	for _, prefix := range []string{names.Prefix() + ".stream.", names.Prefix() + ".hook."} {
		if strings.HasPrefix(subj, prefix) {
			return true
		}
	}
	return false
}

// TestEveryBubMessageIsACloudEvent is an independent subscriber: during
// the golden turns (a denied bash call, a tape tool, a comma command; see
// startGolden) on an in-process cluster it takes every core message on bub.> and,
// afterwards, every message stored in a stream under a bub. subject, and
// validates each as a CloudEvents 1.0 event with the SDK, except token
// deltas and bub.hook.>. A failure names the subject and the reason.
func TestEveryBubMessageIsACloudEvent(t *testing.T) {
	c := startGolden(t, "conformance")
	names := c.Conn.Names
	var (
		mu      sync.Mutex
		bad     []string
		checked = map[string]bool{}
	)
	check := func(where, subj string, h nats.Header, body []byte) {
		if exempt(names, subj) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		checked[where+" "+subj] = true
		if err := checkCloudEvent(h, body); err != nil {
			bad = append(bad, fmt.Sprintf("%s %s: %v: %.200s", where, subj, err, body))
		}
	}
	sub, err := c.Conn.NC.Subscribe(names.Prefix()+".>", func(m *nats.Msg) { check("core", m.Subject, m.Header, m.Data) })
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Conn.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	goldenTurns(t, c)
	c.Tape(t, sampleMeta.SessionID) // every event recorded
	if err := sub.Drain(); err != nil {
		t.Fatal(err)
	}
	streams := c.Conn.JS.ListStreams(t.Context())
	for info := range streams.Info() {
		st, err := c.Conn.JS.Stream(t.Context(), info.Config.Name)
		if err != nil {
			t.Fatal(err)
		}
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
			m, err := st.GetMsg(t.Context(), seq)
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				continue // deleted
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(m.Subject, names.Prefix()+".") {
				check("stream "+info.Config.Name, m.Subject, m.Header, m.Data)
			}
		}
	}
	if err := streams.Err(); err != nil {
		t.Fatal(err)
	}
	seen := slices.Sorted(maps.Keys(checked))
	for _, want := range []string{"core " + names.Tape(sampleMeta.SessionID), "stream " + names.TapesStream() + " " + names.Tape(sampleMeta.SessionID),
		"core " + names.TapeIndex(sampleMeta.SessionID), "stream " + names.TapesStream() + " " + names.TapeIndex(sampleMeta.SessionID), "stream " + names.EventsStream()} {
		if !slices.ContainsFunc(seen, func(s string) bool { return strings.HasPrefix(s, want) }) {
			t.Errorf("checked no message of %s; checked %q", want, seen)
		}
	}
	for _, b := range bad {
		t.Error(b)
	}
	t.Logf("checked %d subjects: %q", len(seen), seen)
}
