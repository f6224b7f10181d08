package envelope

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestContextKeepsInsertionOrderThroughJSON(t *testing.T) {
	var env Envelope
	if err := json.Unmarshal([]byte(`{"id":"1","content":"hi","context":{"z":1,"a":"x","_hidden":true,"m":{"k":2.5}}}`), &env); err != nil {
		t.Fatal(err)
	}
	if got, want := env.ContextStr(), `z=1|a=x|m={"k":2.5}`; got != want {
		t.Fatalf("context_str = %q, want %q", got, want)
	}
	out, err := json.Marshal(env.Context)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(out), `{"z":1,"a":"x","_hidden":true,"m":{"k":2.5}}`; got != want {
		t.Fatalf("marshal = %s, want %s", got, want)
	}
}

// TestNormalizeAppliesChannelMessageRules mirrors Bub's ChannelMessage
// post-init: user keys first, then channel="$<channel>" and chat_id; an
// empty output channel becomes the channel.
func TestNormalizeAppliesChannelMessageRules(t *testing.T) {
	env := Envelope{ID: "1", Content: "x", Channel: "cli", ChatID: "local", Context: NewContext("sender_id", "human", "channel", "old")}
	env.Normalize()
	if got, want := env.ContextStr(), "sender_id=human|channel=$cli|chat_id=local"; got != want {
		t.Fatalf("context_str = %q, want %q", got, want)
	}
	if env.OutputChannel != "cli" || env.Kind != KindNormal {
		t.Fatalf("output_channel %q kind %q", env.OutputChannel, env.Kind)
	}
}

func TestDefaultSessionID(t *testing.T) {
	for _, tc := range []struct {
		env  Envelope
		want string
	}{
		{Envelope{}, "default:default"},
		{Envelope{Channel: "telegram", ChatID: "42"}, "telegram:42"},
		{Envelope{Channel: "cli"}, "cli:default"},
	} {
		if got := tc.env.DefaultSessionID(); got != tc.want {
			t.Errorf("%+v: got %q want %q", tc.env, got, tc.want)
		}
	}
}

func TestValidate(t *testing.T) {
	err := (&Envelope{Kind: "weird"}).Validate()
	for _, want := range []error{ErrNoID, ErrNoContent, ErrKind} {
		if !errors.Is(err, want) {
			t.Errorf("missing %v in %v", want, err)
		}
	}
	if err := (&Envelope{ID: "1", Content: "x"}).Validate(); err != nil {
		t.Fatal(err)
	}
	// Names become subject tokens: at most MaxNameBytes each.
	at, over := strings.Repeat("a", MaxNameBytes), strings.Repeat("a", MaxNameBytes+1)
	full := Envelope{ID: at, Content: "x", SessionID: at, Channel: at, ChatID: at, OutputChannel: at}
	if err := full.Validate(); err != nil {
		t.Fatalf("names of %d bytes: %v", MaxNameBytes, err)
	}
	for name, set := range map[string]func(*Envelope){
		"id":             func(e *Envelope) { e.ID = over },
		"session_id":     func(e *Envelope) { e.SessionID = over },
		"channel":        func(e *Envelope) { e.Channel = over },
		"chat_id":        func(e *Envelope) { e.ChatID = over },
		"output_channel": func(e *Envelope) { e.OutputChannel = over },
	} {
		e := full
		set(&e)
		if err := e.Validate(); !errors.Is(err, ErrNameTooLong) || !strings.Contains(err.Error(), "envelope: "+name+" of 257 bytes") {
			t.Errorf("%s of 257 bytes: %v", name, err)
		}
	}
}

func TestCloneIsIndependent(t *testing.T) {
	env := &Envelope{ID: "1", Content: "x", Context: NewContext("a", 1)}
	c := env.Clone()
	c.Context.Set("b", 2)
	if env.Context.Len() != 1 {
		t.Fatal("clone shares its context")
	}
}

func FuzzEnvelopeJSON(f *testing.F) {
	f.Add([]byte(`{"id":"1","content":"hi","context":{"a":1}}`))
	f.Add([]byte(`{"context":null}`))
	f.Add([]byte(`{"context":{"a":{"b":[1,2,{"c":null}]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var env Envelope
		if err := json.Unmarshal(data, &env); err != nil {
			return
		}
		out, err := json.Marshal(&env)
		if err != nil {
			t.Fatalf("re-marshal: %v", err)
		}
		var again Envelope
		if err := json.Unmarshal(out, &again); err != nil {
			t.Fatalf("round trip: %v (%s)", err, out)
		}
		if again.ContextStr() != env.ContextStr() {
			t.Fatalf("context_str changed: %q vs %q", again.ContextStr(), env.ContextStr())
		}
	})
}

func TestFromBatch(t *testing.T) {
	if _, err := FromBatch(nil); !errors.Is(err, ErrEmptyBatch) {
		t.Fatalf("empty batch: %v, want ErrEmptyBatch", err)
	}
	a := &Envelope{ID: "a", Content: "hello", Media: []Media{{Type: "image", URL: "u1"}}, IsActive: true, Kind: KindNormal}
	b := &Envelope{ID: "b", Content: "world", Kind: KindCommand}
	c := &Envelope{ID: "c", Content: "!", Media: []Media{{Type: "audio", URL: "u2"}}, ChatID: "42"}
	got, err := FromBatch([]*Envelope{a, b, c})
	if err != nil {
		t.Fatal(err)
	}
	want := &Envelope{ID: "c", Content: "hello\nworld\n!", Media: []Media{{Type: "image", URL: "u1"}, {Type: "audio", URL: "u2"}}, ChatID: "42"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	got.Media[0].URL = "changed"
	if a.Media[0].URL != "u1" {
		t.Fatal("the merged message shares its media slice with the batch")
	}
	one, _ := FromBatch([]*Envelope{b})
	if one == b || one.Content != "world" || one.Kind != KindCommand {
		t.Fatalf("single batch: %+v", one)
	}
}
