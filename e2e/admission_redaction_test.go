package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/pkg/events"
)

// TestSecretsNeverReachNATSTapesOrLogs runs turns with a real API key in
// the worker's environment (the fake model requires it), including
// `,bash cmd='env'` and a command reading the worker's own environment
// from /proc, and then searches every message of every stream (events,
// tapes, outbound, inbound, KV buckets, dead letters) and the debug logs
// of every service for the key.
func TestSecretsNeverReachNATSTapesOrLogs(t *testing.T) {
	secret := "sk-secret-" + events.NewID()
	srv := natstest.Start(t)
	fake, base := fakellm.Start(t, fakellm.Script{APIKey: secret})
	env := []string{"BUB_NATS_URL=" + srv.URL, "BUB_MODEL=openai:fake", "BUB_API_BASE=" + base, "BUB_API_KEY=" + secret, "BUB_INGRESS_TOKEN=" + secret + "-ingress"}
	httpAddr := freeAddr(t)
	procs := []*proc{start(t, "ingress", env, "--http", httpAddr)}
	web := "http://" + httpAddr
	waitHTTP(t, web+"/readyz", 30*time.Second)
	procs = append(procs, start(t, "worker", env, "--workspace", t.TempDir()), start(t, "recorder", env))

	ask := func(content string) string {
		t.Helper()
		status, r := postAuth(t, web, secret+"-ingress", map[string]any{"content": content, "session_id": "secrets"}, "30s")
		if status != 200 || len(r.Outbounds) != 1 {
			t.Fatalf("%q: %d %+v", content, status, r)
		}
		return r.Outbounds[0].Content
	}
	if got := ask("hello model"); !strings.Contains(got, "hello model") {
		t.Fatalf("model turn: %q", got)
	}
	if len(fake.Requests()) != 1 {
		t.Fatal("the model was not called with the key")
	}
	if got := ask(",bash cmd='env'"); !strings.Contains(got, "PATH=") || strings.Contains(got, "BUB_API_KEY") {
		t.Fatalf(",bash env: %q", got)
	}
	if got := ask(",bash cmd='cat /proc/$PPID/environ'"); !strings.Contains(got, "BUB_API_KEY=[redacted]") {
		t.Fatalf(",bash reading the worker's environment: %q", got)
	}
	_, js := srv.JetStream(t)
	eventually(t, 30*time.Second, func() (bool, string) {
		n := 0
		for _, m := range streamMessages(t, js) {
			if m.stream == "BUB_TAPES" {
				n++
			}
		}
		return n >= 6, fmt.Sprintf("%d tape entries", n)
	})
	for _, m := range streamMessages(t, js) {
		if bytes.Contains(m.data, []byte(secret)) || strings.Contains(fmt.Sprint(m.header), secret) {
			t.Errorf("the API key is in stream %s, subject %s:\n%s", m.stream, m.subject, m.data)
		}
	}
	for _, p := range procs {
		if strings.Contains(p.Output(), secret) {
			t.Errorf("the API key is in the log of %s", p.Name)
		}
	}
}

type streamMsg struct {
	stream, subject string
	header          map[string][]string
	data            []byte
}

// streamMessages reads every message of every stream on the server.
func streamMessages(t *testing.T, js jetstream.JetStream) []streamMsg {
	t.Helper()
	ctx := context.Background()
	var out []streamMsg
	names := js.StreamNames(ctx)
	for name := range names.Name() {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
			raw, err := st.GetMsg(ctx, seq)
			if err != nil {
				continue // deleted
			}
			out = append(out, streamMsg{stream: name, subject: raw.Subject, header: raw.Header, data: raw.Data})
		}
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// postAuth is post with a bearer token.
func postAuth(t *testing.T, base, token string, body any, wait string) (int, reply) {
	t.Helper()
	b, _ := json.Marshal(body)
	url := base + "/v1/messages?wait=" + wait
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	var r reply
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("reply %d is not JSON: %v", resp.StatusCode, err)
	}
	return resp.StatusCode, r
}
