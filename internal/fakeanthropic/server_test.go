package fakeanthropic_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/bubbus/bub/internal/fakeanthropic"
)

// TestRefusesWhatTheAPIRefuses: requests the Messages API rejects get its
// 400 invalid_request_error (or 401 / 404), so tests cannot pass on them.
func TestRefusesWhatTheAPIRefuses(t *testing.T) {
	tests := []struct {
		name, path, body, key string
		wantStatus            int
		wantType, wantMessage string
	}{
		{name: "no max_tokens", body: `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
			wantStatus: 400, wantType: "invalid_request_error", wantMessage: "max_tokens"},
		{name: "no model", body: `{"max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`,
			wantStatus: 400, wantType: "invalid_request_error", wantMessage: "model"},
		{name: "no messages", body: `{"model":"m","max_tokens":1,"messages":[]}`,
			wantStatus: 400, wantType: "invalid_request_error", wantMessage: "at least one message"},
		{name: "system role", body: `{"model":"m","max_tokens":1,"messages":[{"role":"system","content":"x"}]}`,
			wantStatus: 400, wantType: "invalid_request_error", wantMessage: "'user' or 'assistant'"},
		{name: "empty text block", body: `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":""}]}]}`,
			wantStatus: 400, wantType: "invalid_request_error", wantMessage: "non-empty"},
		{name: "tool_use without result", body: `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"},
			{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"x","input":{}}]},{"role":"user","content":"next"}]}`,
			wantStatus: 400, wantType: "invalid_request_error", wantMessage: "without `tool_result`"},
		{name: "result without tool_use", body: `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t9"}]}]}`,
			wantStatus: 400, wantType: "invalid_request_error", wantMessage: "unexpected `tool_use_id`"},
		{name: "not JSON", body: `{`, wantStatus: 400, wantType: "invalid_request_error", wantMessage: "not a messages request"},
		{name: "wrong key", key: "nope", body: `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`,
			wantStatus: 401, wantType: "authentication_error", wantMessage: "x-api-key"},
		{name: "other path", path: "/v1/complete", body: `{}`, wantStatus: 404, wantType: "not_found_error", wantMessage: "not found"},
		{name: "answered tool loop", body: `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"},
			{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"x","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}]}`, wantStatus: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake, base := fakeanthropic.Start(t, fakeanthropic.Script{APIKey: "k"})
			path := tt.path
			if path == "" {
				path = "/v1/messages"
			}
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			key := tt.key
			if key == "" {
				key = "k"
			}
			req.Header.Set("X-Api-Key", key)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			var body struct {
				Type  string `json:"type"`
				Error struct{ Type, Message string }
			}
			if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d (%+v)", res.StatusCode, tt.wantStatus, body)
			}
			if tt.wantStatus == 200 {
				if body.Type != "message" {
					t.Errorf("answer %+v", body)
				}
				return
			}
			if body.Type != "error" || body.Error.Type != tt.wantType || !strings.Contains(body.Error.Message, tt.wantMessage) {
				t.Errorf("error body %+v, want %s containing %q", body, tt.wantType, tt.wantMessage)
			}
			if tt.path == "" && len(fake.Requests()) != 1 {
				t.Errorf("%d requests recorded", len(fake.Requests()))
			}
		})
	}
}
