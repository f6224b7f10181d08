package ingress_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/ingress"
	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/subjects"
)

type fixture struct {
	nc    *nats.Conn
	js    jetstream.JetStream
	names subjects.Names
	gw    *ingress.Gateway
	srv   *httptest.Server
}

func setup(t *testing.T, cfg ingress.Config) *fixture {
	t.Helper()
	return setupWith(t, cfg, &server.Options{})
}

// setupWith is setup on a server started with opts.
func setupWith(t *testing.T, cfg ingress.Config, opts *server.Options) *fixture {
	t.Helper()
	s := natstest.StartWithOptions(t, opts)
	nc, js := s.JetStream(t)
	names := subjects.Default()
	if err := natsx.EnsureTopology(context.Background(), js, names, natsx.Topology{}); err != nil {
		t.Fatal(err)
	}
	gw, hs := serve(t, cfg, nc, js, names)
	return &fixture{nc: nc, js: js, names: names, gw: gw, srv: hs}
}

// serve starts a gateway publishing through js and an ingress server of
// cfg over it, both closed when t ends.
func serve(t *testing.T, cfg ingress.Config, nc *nats.Conn, js jetstream.JetStream, names subjects.Names) (*ingress.Gateway, *httptest.Server) {
	t.Helper()
	gw, err := ingress.NewGateway(nc, js, names, events.Source("ingress", "test"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.Close() })
	srv, err := ingress.NewServer(cfg, gw, func(context.Context) error { return nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return gw, hs
}

// reply publishes out on session's outbound subject, as a worker does.
func (f *fixture) reply(t *testing.T, session string, out envelope.Envelope) {
	t.Helper()
	ev, err := events.New(events.TypeEnvelopeOutbound, events.Attrs{Source: "/bub/worker/test", SessionID: session}, out)
	if err != nil {
		t.Fatal(err)
	}
	m, err := events.ToMsg(f.names.Outbound("http", session), ev)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.js.PublishMsg(t.Context(), m); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) inboundCount(t *testing.T) uint64 {
	t.Helper()
	st, err := f.js.Stream(context.Background(), f.names.InboundStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func post(t *testing.T, url string, header http.Header, body string) (int, map[string]any) {
	t.Helper()
	return call(t, http.MethodPost, url, header, strings.NewReader(body))
}

// call sends a request and decodes its JSON response.
func call(t *testing.T, method, url string, header http.Header, body io.Reader) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: response %d is not JSON: %q", method, url, resp.StatusCode, raw)
	}
	return resp.StatusCode, out
}

func jsonHeader() http.Header { return http.Header{"Content-Type": {"application/json"}} }

// TestEnvelopeLargerThanMaxPayload: a body within the ingress's limit
// whose envelope the NATS server does not take (its max_payload, 4 KiB
// here) is answered 413 payload_too_large naming max_payload, and nothing
// is stored.
func TestEnvelopeLargerThanMaxPayload(t *testing.T) {
	f := setupWith(t, ingress.Config{}, &server.Options{MaxPayload: 4 << 10})
	status, body := post(t, f.srv.URL+"/v1/messages", jsonHeader(), `{"content":"`+strings.Repeat("a", 8<<10)+`"}`)
	if status != http.StatusRequestEntityTooLarge || body["code"] != "payload_too_large" {
		t.Fatalf("status %d, body %v, want 413 payload_too_large", status, body)
	}
	if msg, _ := body["error"].(string); !strings.Contains(msg, "max_payload") || !strings.Contains(msg, "4096") {
		t.Errorf("error %q, want the server's max_payload (4096) named", msg)
	}
	if n := f.inboundCount(t); n != 0 {
		t.Errorf("%d inbound messages stored, want 0", n)
	}
}

func TestBadInputIsRejectedAndNothingPublished(t *testing.T) {
	f := setup(t, ingress.Config{MaxBodyBytes: 256})
	cases := []struct {
		name   string
		header http.Header
		body   string
		status int
		code   string
	}{
		{"empty body", jsonHeader(), "", 400, "empty_body"},
		{"invalid json", jsonHeader(), `{"content":`, 400, "invalid_json"},
		{"unknown field", jsonHeader(), `{"content":"x","bogus":1}`, 400, "invalid_json"},
		{"trailing data", jsonHeader(), `{"content":"x"} {}`, 400, "invalid_json"},
		{"missing content", jsonHeader(), `{"channel":"http"}`, 400, "missing_content"},
		{"context not object", jsonHeader(), `{"content":"x","context":[1]}`, 400, "invalid_json"},
		{"oversized body", jsonHeader(), `{"content":"` + strings.Repeat("a", 300) + `"}`, 413, "body_too_large"},
		{"wrong media type", http.Header{"Content-Type": {"text/plain"}}, `hello`, 415, "unsupported_media_type"},
		{"json prefix of another type", http.Header{"Content-Type": {"application/jsonx"}}, `{"content":"x"}`, 415, "unsupported_media_type"},
		{"not a media type", http.Header{"Content-Type": {"json please"}}, `{"content":"x"}`, 415, "unsupported_media_type"},
		{"unknown cloudevent type", http.Header{
			"Content-Type": {"application/json"}, "Ce-Specversion": {"1.0"}, "Ce-Id": {"1"},
			"Ce-Source": {"/x"}, "Ce-Type": {"com.example.other"},
		}, `{"content":"x"}`, 400, "unknown_event_type"},
		{"cloudevent missing id", http.Header{"Content-Type": {events.ContentTypeStructured}},
			`{"specversion":"1.0","source":"/x","type":"dev.bub.envelope.inbound.v1","data":{"content":"x"}}`, 400, "invalid_cloudevent"},
		{"invalid kind", jsonHeader(), `{"content":"x","kind":"weird"}`, 422, "invalid_envelope"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(t, f.srv.URL+"/v1/messages", tc.header, tc.body)
			if status != tc.status || body["code"] != tc.code {
				t.Fatalf("got %d %v, want %d code %s", status, body, tc.status, tc.code)
			}
			if msg, _ := body["error"].(string); msg == "" {
				t.Fatalf("no reason in %v", body)
			}
		})
	}
	if n := f.inboundCount(t); n != 0 {
		t.Fatalf("%d messages published for bad input", n)
	}
	status, body := post(t, f.srv.URL+"/v1/messages?wait=soon", jsonHeader(), `{"content":"x"}`)
	if status != 400 || body["code"] != "invalid_wait" {
		t.Fatalf("bad wait: %d %v", status, body)
	}
}

func TestAcceptsJSONAndBothCloudEventModesIdempotently(t *testing.T) {
	f := setup(t, ingress.Config{})
	url := f.srv.URL + "/v1/messages"
	status, body := post(t, url, jsonHeader(), `{"id":"m1","content":"hi","chat_id":"42"}`)
	if status != 202 || body["id"] != "m1" || body["session_id"] != "http:42" {
		t.Fatalf("json: %d %v", status, body)
	}
	status, body = post(t, url, jsonHeader(), `{"id":"m1","content":"hi","chat_id":"42"}`)
	if status != 202 || body["duplicate"] != true {
		t.Fatalf("retry: %d %v", status, body)
	}
	binary := http.Header{
		"Content-Type": {"application/json"}, "Ce-Specversion": {"1.0"}, "Ce-Id": {"ce-bin"},
		"Ce-Source": {"/client"}, "Ce-Type": {events.TypeEnvelopeInbound},
	}
	status, body = post(t, url, binary, `{"content":"binary mode","session_id":"s b"}`)
	if status != 202 || body["id"] != "ce-bin" || body["session_id"] != "s b" {
		t.Fatalf("binary: %d %v", status, body)
	}
	structured := `{"specversion":"1.0","id":"ce-str","source":"/client","type":"dev.bub.envelope.inbound.v1",` +
		`"datacontenttype":"application/json","data":{"content":"structured"}}`
	status, body = post(t, url, http.Header{"Content-Type": {events.ContentTypeStructured}}, structured)
	if status != 202 || body["id"] != "ce-str" {
		t.Fatalf("structured: %d %v", status, body)
	}
	// Media types are case-insensitive and may carry parameters.
	status, body = post(t, url, http.Header{"Content-Type": {"Application/JSON; charset=utf-8"}}, `{"id":"m2","content":"mixed case"}`)
	if status != 202 || body["id"] != "m2" {
		t.Fatalf("mixed-case media type: %d %v", status, body)
	}
	if n := f.inboundCount(t); n != 4 {
		t.Fatalf("inbound stream holds %d messages, want 4", n)
	}
}

func TestBearerToken(t *testing.T) {
	f := setup(t, ingress.Config{Token: "s3cret"})
	url := f.srv.URL + "/v1/messages"
	if status, body := post(t, url, jsonHeader(), `{"content":"x"}`); status != 401 || body["code"] != "unauthorized" {
		t.Fatalf("no token: %d %v", status, body)
	}
	h := jsonHeader()
	h.Set("Authorization", "Bearer wrong")
	if status, _ := post(t, url, h, `{"content":"x"}`); status != 401 {
		t.Fatalf("wrong token: %d", status)
	}
	h.Set("Authorization", "Bearer s3cret")
	if status, _ := post(t, url, h, `{"content":"x"}`); status != 202 {
		t.Fatalf("right token: %d", status)
	}
}

// TestWaitCollectsEveryOutboundOnce answers an inbound envelope the way a
// worker does (two outbound envelopes, one of them published twice) and
// checks the waiting request gets both, in batch order, once.
func TestWaitCollectsEveryOutboundOnce(t *testing.T) {
	f := setup(t, ingress.Config{})
	sub, err := f.nc.SubscribeSync(f.names.InboundAll())
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		msg, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			return
		}
		ev, _ := events.FromMsg(msg)
		for _, ix := range []int{1, 0, 1} {
			out := envelope.Envelope{ID: ev.ID() + "-" + string(rune('a'+ix)), Content: "reply", InReplyTo: ev.ID(), BatchIndex: ix, BatchSize: 2}
			oe, _ := events.New(events.TypeEnvelopeOutbound, events.Attrs{Source: "/bub/worker/test", SessionID: "s"}, out)
			m, _ := events.ToMsg(f.names.Outbound("http", "s"), oe)
			_, _ = f.js.PublishMsg(context.Background(), m)
		}
	}()
	status, body := post(t, f.srv.URL+"/v1/messages?wait=10s", jsonHeader(), `{"id":"w1","content":"hi","session_id":"s"}`)
	if status != 200 {
		t.Fatalf("wait: %d %v", status, body)
	}
	outs, _ := body["outbounds"].([]any)
	if len(outs) != 2 {
		t.Fatalf("got %d outbounds: %v", len(outs), body)
	}
	if id := outs[0].(map[string]any)["id"]; id != "w1-a" {
		t.Fatalf("first outbound %v, want w1-a", id)
	}
}

func TestWaitTimeoutReportsPending(t *testing.T) {
	f := setup(t, ingress.Config{})
	status, body := post(t, f.srv.URL+"/v1/messages?wait=50ms", jsonHeader(), `{"content":"nobody answers"}`)
	if status != 202 || body["pending"] != true {
		t.Fatalf("got %d %v", status, body)
	}
}

// TestTinyWaitStillPublishes: a wait shorter than any publish (1ns) still
// gets one whole publish attempt: the message is stored and the answer is
// 202 pending, not 503 publish_failed.
func TestTinyWaitStillPublishes(t *testing.T) {
	f := setup(t, ingress.Config{})
	status, body := post(t, f.srv.URL+"/v1/messages?wait=1ns", jsonHeader(), `{"content":"in a hurry"}`)
	if status != 202 || body["pending"] != true || body["id"] == "" {
		t.Fatalf("got %d %v, want 202 pending with the id", status, body)
	}
	if n := f.inboundCount(t); n != 1 {
		t.Fatalf("inbound stream holds %d messages, want the one posted", n)
	}
}

// TestLongNamesAreRejectedAndTheConnectionSurvives: a name that would make
// a subject longer than the NATS control line (the server then closes the
// connection that sent it) is a 4xx naming the field, on every route that
// turns one into a subject, and the ingress's connection stays up.
func TestLongNamesAreRejectedAndTheConnectionSurvives(t *testing.T) {
	f := setup(t, ingress.Config{})
	long := strings.Repeat("é", 2500) // 5,000 bytes, 15,000 as a subject token
	for _, field := range []string{"id", "session_id", "channel", "chat_id", "output_channel"} {
		status, body := post(t, f.srv.URL+"/v1/messages", jsonHeader(), `{"content":"x","`+field+`":"`+long+`"}`)
		msg, _ := body["error"].(string)
		if status != 422 || body["code"] != "invalid_envelope" || !strings.Contains(msg, field) || !strings.Contains(msg, "longer than 256 bytes") {
			t.Errorf("%s of 5000 bytes: %d %v, want 422 invalid_envelope naming the field", field, status, body)
		}
	}
	for _, path := range []string{"/events", "/tape"} {
		status, body := call(t, http.MethodGet, f.srv.URL+"/v1/sessions/"+url.PathEscape(long)+path, nil, nil)
		if status != 400 || body["code"] != "invalid_session" {
			t.Errorf("GET %s of a 5000-byte session: %d %v, want 400 invalid_session", path, status, body)
		}
	}
	ok := strings.Repeat("a", envelope.MaxNameBytes)
	status, body := post(t, f.srv.URL+"/v1/messages", jsonHeader(), `{"content":"x","session_id":"`+ok+`","channel":"`+ok+`"}`)
	if status != 202 {
		t.Fatalf("names of %d bytes: %d %v, want 202", envelope.MaxNameBytes, status, body)
	}
	if n := f.inboundCount(t); n != 1 {
		t.Fatalf("inbound stream holds %d messages, want only the last one", n)
	}
	if st := f.nc.Status(); st != nats.CONNECTED {
		t.Fatalf("ingress connection %v, want CONNECTED", st)
	}
}

// TestShutdownEndsEventStreams: an open GET /v1/sessions/{s}/events does
// not hold a graceful shutdown until its grace runs out: Run ends the
// stream and returns nil at once.
func TestShutdownEndsEventStreams(t *testing.T) {
	const grace = 5 * time.Second
	f := setup(t, ingress.Config{})
	srv, err := ingress.NewServer(ingress.Config{ShutdownGrace: grace}, f.gw, func(context.Context) error { return nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, ln) }()

	resp, err := http.Get("http://" + ln.Addr().String() + "/v1/sessions/s1/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("events: %d", resp.StatusCode)
	}
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil || time.Since(start) > grace/2 {
			t.Fatalf("Run returned %v after %v, want nil at once", err, time.Since(start))
		}
	case <-time.After(grace + 5*time.Second):
		t.Fatal("Run did not return")
	}
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Fatalf("the stream did not end cleanly: %v", err)
	}
}

// TestEventStreamCarriesDeltasAndEvents reads GET
// /v1/sessions/{s}/events: a token delta of any run of the session is a
// "delta" event with the delta as data, a lifecycle event is named by its
// type with the structured event as data, and a foreign message on the
// events subject is an "invalid" event (not "error", which a browser's
// EventSource hands to onerror); another session's are not sent.
func TestEventStreamCarriesDeltasAndEvents(t *testing.T) {
	f := setup(t, ingress.Config{})
	resp, err := http.Get(f.srv.URL + "/v1/sessions/s1/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), ": streaming session") {
		t.Fatalf("first line %q", lines.Text())
	}
	ev, err := events.New(events.TypeEnvelopeOutbound, events.Attrs{Source: "/bub/worker/test", SessionID: "s1"}, envelope.Envelope{ID: "m/0", Content: "reply"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := events.ToMsg(f.names.Event("s1", "envelope.outbound"), ev)
	if err != nil {
		t.Fatal(err)
	}
	delta := `{"run_id":"r1","seq":1,"kind":"text","text":"hel"}`
	for _, msg := range []*nats.Msg{
		{Subject: f.names.TokenStream("s2", "r9"), Data: []byte(`{"other":"session"}`)},
		{Subject: f.names.TokenStream("s1", "r1"), Data: []byte(delta)},
		m,
		{Subject: f.names.Event("s1", "x"), Data: []byte("not an event")},
	} {
		if err := f.nc.PublishMsg(msg); err != nil {
			t.Fatal(err)
		}
	}
	want := [][2]string{{"delta", delta}, {ev.Type(), ""}, {"invalid", ""}}
	for i := 0; i < len(want); {
		if !lines.Scan() {
			t.Fatalf("stream ended: %v", lines.Err())
		}
		name, ok := strings.CutPrefix(lines.Text(), "event: ")
		if !ok {
			continue
		}
		lines.Scan()
		data, _ := strings.CutPrefix(lines.Text(), "data: ")
		if name != want[i][0] || want[i][1] != "" && data != want[i][1] {
			t.Fatalf("event %d: %q %s, want %q %s", i, name, data, want[i][0], want[i][1])
		}
		if name == ev.Type() {
			got, err := events.Decode(http.Header{"Content-Type": {events.ContentTypeStructured}}, []byte(data))
			if err != nil || got.ID() != ev.ID() {
				t.Fatalf("lifecycle event data %s: %v", data, err)
			}
		}
		i++
	}
}
