package telegramtest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

type reply struct {
	OK          bool            `json:"ok"`
	Result      json.RawMessage `json:"result"`
	ErrorCode   int             `json:"error_code"`
	Description string          `json:"description"`
	Parameters  struct {
		RetryAfter int `json:"retry_after"`
	} `json:"parameters"`
}

func call(t *testing.T, ctx context.Context, s *Server, token, method, body string) (int, reply) {
	t.Helper()
	status, r, err := post(ctx, s, token, method, body)
	if err != nil {
		t.Fatal(err)
	}
	return status, r
}

func post(ctx context.Context, s *Server, token, method, body string) (int, reply, error) {
	var r reply
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/bot"+token+"/"+method, strings.NewReader(body))
	if err != nil {
		return 0, r, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, r, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&r)
	return resp.StatusCode, r, err
}

func updateIDs(t *testing.T, r reply) []int64 {
	t.Helper()
	var ups []struct {
		UpdateID int64 `json:"update_id"`
	}
	if err := json.Unmarshal(r.Result, &ups); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, u := range ups {
		ids = append(ids, u.UpdateID)
	}
	return ids
}

func TestEnvelopeAndErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s := NewServer(t)
	tests := []struct {
		name, token, method, body string
		status                    int
		desc                      string
	}{
		{"getMe", s.Token(), "getMe", `{}`, 200, ""},
		{"wrong token", "1:bad", "getMe", `{}`, 401, "Unauthorized"},
		{"unknown method", s.Token(), "sendPigeon", `{}`, 404, "Not Found: method not found"},
		{"empty text", s.Token(), "sendMessage", `{"chat_id":1,"text":" "}`, 400, "Bad Request: message text is empty"},
		{"too long", s.Token(), "sendMessage", `{"chat_id":1,"text":"` + strings.Repeat("é", MaxMessageLength+1) + `"}`, 400, "Bad Request: message is too long"},
		{"no chat", s.Token(), "sendChatAction", `{"action":"typing"}`, 400, "Bad Request: chat_id is empty"},
		{"bad json", s.Token(), "getUpdates", `{`, 400, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, r := call(t, ctx, s, tt.token, tt.method, tt.body)
			if status != tt.status || r.OK != (tt.status == 200) || (tt.status != 200 && r.ErrorCode != tt.status) || (tt.desc != "" && r.Description != tt.desc) {
				t.Fatalf("%d %+v, want %d %q", status, r, tt.status, tt.desc)
			}
		})
	}
	s.FailNext("sendMessage", Failure{Code: 429, Description: "Too Many Requests: retry after 5", RetryAfter: 5})
	status, r := call(t, ctx, s, s.Token(), "sendMessage", `{"chat_id":1,"text":"x"}`)
	if status != 429 || r.Parameters.RetryAfter != 5 || len(s.Sent()) != 0 {
		t.Fatalf("%d %+v", status, r)
	}
	if status, _ := call(t, ctx, s, s.Token(), "sendMessage", `{"chat_id":"1","text":"x"}`); status != 200 || len(s.Sent()) != 1 || s.Sent()[0].ChatID != "1" {
		t.Fatalf("after the failure: %d %+v", status, s.Sent())
	}
}

func TestLongPolling(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s := NewServer(t)
	tok := s.Token()

	// An empty queue with timeout 0 answers at once.
	if _, r := call(t, ctx, s, tok, "getUpdates", `{"timeout":0}`); string(r.Result) != "[]" {
		t.Fatalf("result %s", r.Result)
	}
	// A waiting poll is answered by the next update.
	got := make(chan reply, 1)
	go func() {
		_, r, _ := post(ctx, s, tok, "getUpdates", `{"timeout":30}`)
		got <- r
	}()
	if err := s.Wait(ctx, func() bool { return len(s.Calls()) == 2 }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SendUserMessage(1, "hi"); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if ids := updateIDs(t, r); !slices.Equal(ids, []int64{1}) {
			t.Fatalf("ids %v", ids)
		}
	case <-ctx.Done():
		t.Fatal("long poll not answered")
	}
	for range 4 {
		if _, err := s.SendUserMessage(1, "more"); err != nil {
			t.Fatal(err)
		}
	}
	// Offset confirms earlier updates; limit bounds the answer.
	if _, r := call(t, ctx, s, tok, "getUpdates", `{"offset":2,"limit":2}`); !slices.Equal(updateIDs(t, r), []int64{2, 3}) || s.Pending() != 4 {
		t.Fatalf("ids %v pending %d", updateIDs(t, r), s.Pending())
	}
	// A negative offset keeps only the last updates.
	if _, r := call(t, ctx, s, tok, "getUpdates", `{"offset":-1}`); !slices.Equal(updateIDs(t, r), []int64{5}) || s.Pending() != 1 {
		t.Fatalf("ids %v pending %d", updateIDs(t, r), s.Pending())
	}
	// Form parameters work too, and allowed_updates filters kinds.
	if _, err := s.PushUpdate("edited_message", s.Message(1, "edit")); err != nil {
		t.Fatal(err)
	}
	form := url.Values{"offset": {"6"}, "allowed_updates": {`["message"]`}}
	resp, err := http.PostForm(s.URL()+"/bot"+tok+"/getUpdates", form)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"result":[]`) || len(s.AllowedUpdates()) != 1 {
		t.Fatalf("form answer %s allowed %v", body, s.AllowedUpdates())
	}
	// deleteWebhook drops what is pending.
	if _, r := call(t, ctx, s, tok, "deleteWebhook", `{"drop_pending_updates":true}`); !r.OK || s.Pending() != 0 {
		t.Fatalf("pending %d after deleteWebhook", s.Pending())
	}
}

func TestCloseEndsLongPolls(t *testing.T) {
	s := New()
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.Post(s.URL()+"/bot"+s.Token()+"/getUpdates", "application/json", strings.NewReader(`{"timeout":300}`))
		if err == nil {
			resp.Body.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := s.Wait(ctx, func() bool { return len(s.Calls()) == 1 }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("Close left a long poll waiting")
	}
}

func TestFiles(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s := NewServer(t)
	id := s.AddFile([]byte("content"))
	_, r := call(t, ctx, s, s.Token(), "getFile", `{"file_id":"`+id+`"}`)
	var f struct {
		FilePath string `json:"file_path"`
		FileSize int    `json:"file_size"`
	}
	if err := json.Unmarshal(r.Result, &f); err != nil || f.FileSize != 7 {
		t.Fatalf("getFile %+v %v", f, err)
	}
	resp, err := http.Get(s.URL() + "/file/bot" + s.Token() + "/" + f.FilePath)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "content" {
		t.Fatalf("file %q", body)
	}
	if _, r := call(t, ctx, s, s.Token(), "getFile", `{"file_id":"nope"}`); r.OK || r.ErrorCode != 400 {
		t.Fatalf("unknown file: %+v", r)
	}
}

func TestListenAndControl(t *testing.T) {
	s, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resp, err := http.Post(s.URL()+"/_fake/message", "application/json", strings.NewReader(`{"chat_id":9,"text":"from outside"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || s.Pending() != 1 {
		t.Fatalf("status %d pending %d", resp.StatusCode, s.Pending())
	}
	if resp, err := http.Post(s.URL()+"/_fake/message", "application/json", strings.NewReader(`{}`)); err != nil || resp.StatusCode != 400 {
		t.Fatalf("empty message: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	call(t, ctx, s, s.Token(), "sendMessage", `{"chat_id":9,"text":"answer"}`)
	resp, err = http.Get(s.URL() + "/_fake/sent")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"chat_id":"9","text":"answer"`) {
		t.Fatalf("sent %s", body)
	}
}
