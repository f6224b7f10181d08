package tape

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	ce "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/pkg/subjects"
)

// validEvent decodes body as a structured-mode CloudEvent with the SDK and
// validates it.
func validEvent(t testing.TB, body []byte) ce.Event {
	t.Helper()
	ev := ce.New()
	if err := json.Unmarshal(body, &ev); err != nil {
		t.Fatalf("not a CloudEvent: %v\n%s", err, body)
	}
	if err := ev.Validate(); err != nil {
		t.Fatalf("invalid CloudEvent: %v\n%s", err, body)
	}
	return ev
}

func TestJetStreamStoresEntriesAsCloudEvents(t *testing.T) {
	f := newFixture(t)
	nc, err := nats.Connect(f.srv.URL, nats.Name("recorder t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewJetStreamStore(t.Context(), js, f.names)
	if err != nil {
		t.Fatal(err)
	}
	const session = "telegram:42"
	first := MessageEntry(map[string]any{"role": "user", "content": "hi ✓"}, map[string]any{"run_id": "run-1"})
	first.Date = "2026-01-02T03:04:05.123456+00:00"
	imported := System("legacy date")
	imported.Date = "yesterday"
	start := time.Now()
	stored, err := s.Append(t.Context(), session, []Entry{first, imported, userMsg("c")})
	if err != nil {
		t.Fatal(err)
	}
	loc, err := s.Archive(t.Context(), session, stored[:1])
	if err != nil {
		t.Fatal(err)
	}
	ix, err := s.Index(t.Context(), session)
	if err != nil {
		t.Fatal(err)
	}
	check := func(seq uint64, e Entry, archived bool) {
		t.Helper()
		m, err := s.stream.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatal(err)
		}
		ev := validEvent(t, m.Data)
		if ev.Type() != EntryEventType || ev.Source() != "/bub/tape/recorder%20t" || ev.Subject() != session ||
			ev.DataContentType() != "application/json" || ev.Extensions()["sessionid"] != session || ev.Extensions()["partitionkey"] != session {
			t.Errorf("attributes of entry %d: %s", e.ID, m.Data)
		}
		if ct := m.Header.Get("Content-Type"); ct != "application/cloudevents+json" {
			t.Errorf("Content-Type %q, want structured mode", ct)
		}
		if ev.ID() != m.Header.Get(jetstream.MsgIDHeader) {
			t.Errorf("event id %q, Nats-Msg-Id %q", ev.ID(), m.Header.Get(jetstream.MsgIDHeader))
		}
		idPrefix := "telegram_3a42:" + strconv.FormatInt(e.ID, 10) + ":"
		if !strings.HasPrefix(ev.ID(), idPrefix) || archived != strings.Contains(ev.ID(), ":archive:") {
			t.Errorf("event id %q, want <tape token>:<entry id>:… (archive %v)", ev.ID(), archived)
		}
		if want := appendEntry(nil, e); !bytes.Equal(ev.Data(), want) {
			t.Errorf("data %s, want the JSONL line %s", ev.Data(), want)
		}
		if got, want := ev.Extensions()["runid"], e.Meta["run_id"]; want != nil && got != want || want == nil && got != nil {
			t.Errorf("runid %v, want %v", got, want)
		}
		if wantTime, err := time.Parse(time.RFC3339Nano, e.Date); err == nil && !ev.Time().Equal(wantTime) {
			t.Errorf("time %v, want the entry date %q", ev.Time(), e.Date)
		} else if err != nil && (ev.Time().Before(start) || ev.Time().After(time.Now())) {
			t.Errorf("time %v of an entry dated %q, want the time of writing", ev.Time(), e.Date)
		}
	}
	for i, e := range stored {
		check(ix.FirstSeq+uint64(i), e, false)
	}
	check(ix.Revision+1, stored[0], true)
	// The index that committed them is the event after them.
	m, err := s.stream.GetMsg(t.Context(), ix.Revision)
	if err != nil || ix.Revision != ix.Seq+1 {
		t.Fatalf("index message at %d (last entry at %d): %v", ix.Revision, ix.Seq, err)
	}
	if ev := validEvent(t, m.Data); ev.Type() != IndexEventType || ev.Subject() != session || ev.ID() != m.Header.Get(jetstream.MsgIDHeader) || m.Subject != f.names.TapeIndex(session) {
		t.Errorf("index message on %s: %s", m.Subject, m.Data)
	}
	got, err := s.ReadArchive(t.Context(), loc)
	if err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], stored[0]) {
		t.Fatalf("archive %v, %v; want %v", got, err, stored[:1])
	}
}

// TestJetStreamReadsLegacyTapes: a tape written by an earlier version
// holds bare JSON lines, and its index is in the KV bucket. A store that
// provisions copies the index to the stream and deletes the bucket;
// reads, appends after the legacy entries and archives keep working, and
// new entries are events.
func TestJetStreamReadsLegacyTapes(t *testing.T) {
	f := newFixture(t)
	_, js := f.srv.JetStream(t)
	ctx := t.Context()
	const tape = "old"
	old := StreamConfig(f.names)
	old.Subjects, old.AllowAtomicPublish, old.AllowRollup = []string{f.names.TapesAll(), f.names.TapeArchivesAll()}, false, false
	if _, err := js.CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: f.names.TapeIndexBucket(), History: 1, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	legacy, err := numberEntries([]Entry{userMsg("a"), Anchor("handoff", nil), userMsg("b")}, 1)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for _, e := range legacy {
		ack, err := js.Publish(ctx, f.names.Tape(tape), appendEntry(nil, e))
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ack.Sequence)
	}
	index, err := json.Marshal(Index{Tape: tape}.next(legacy, seqs, appendOptions{commitID: "run-1"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, subjects.Token(tape), index); err != nil {
		t.Fatal(err)
	}

	s := f.store(t)
	if _, err := js.KeyValue(ctx, f.names.TapeIndexBucket()); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("the bucket after the migration: %v", err)
	}
	if n, err := MigrateIndexBucket(ctx, js, f.names); n != 0 || err != nil {
		t.Fatalf("migrating again: %d, %v", n, err)
	}
	wantContents(t, s, tape, "1:a", "2:<nil>", "3:b")
	after, err := s.Fetch(ctx, tape, All().LastAnchor())
	if err != nil || len(after) != 1 || !reflect.DeepEqual(after[0], legacy[2]) {
		t.Fatalf("after the last anchor: %v, %v; want %v", after, err, legacy[2:])
	}
	// The migrated index remembers its commits.
	if again, err := s.Append(ctx, tape, []Entry{userMsg("x")}, WithCommitID("run-1")); err != nil || len(again) != 3 {
		t.Fatalf("a commit of before the migration again: %v, %v", again, err)
	}
	if _, err := s.Append(ctx, tape, []Entry{userMsg("c")}); err != nil {
		t.Fatal(err)
	}
	wantContents(t, s, tape, "1:a", "2:<nil>", "3:b", "4:c")
	last, err := s.stream.GetLastMsgForSubject(ctx, f.names.Tape(tape))
	if err != nil {
		t.Fatal(err)
	}
	validEvent(t, last.Data)

	ack, err := js.Publish(ctx, f.names.TapeArchive(tape), appendEntry(nil, legacy[0]))
	if err != nil {
		t.Fatal(err)
	}
	loc := f.names.TapesStream() + ":" + f.names.TapeArchive(tape) + ":" + strconv.FormatUint(ack.Sequence, 10) + "-" + strconv.FormatUint(ack.Sequence, 10)
	arch, err := s.ReadArchive(ctx, loc)
	if err != nil || len(arch) != 1 || !reflect.DeepEqual(arch[0], legacy[0]) {
		t.Fatalf("legacy archive: %v, %v", arch, err)
	}
}

func TestDecodeMessage(t *testing.T) {
	e, err := numberEntries([]Entry{MessageEntry(map[string]any{"role": "user", "content": "hi"})}, 7)
	if err != nil {
		t.Fatal(err)
	}
	event := appendMessage(nil, entryMessage{id: "x:7:k:1", source: "/bub/tape", session: "s"}, e[0])
	line := appendEntry(nil, e[0])
	for _, c := range []struct {
		name string
		body string
		ok   bool
	}{
		{"event", string(event), true},
		{"bare line", string(line), true},
		{"event without datacontenttype", strings.Replace(string(event), `"datacontenttype":"application/json",`, "", 1), true},
		{"other type", strings.Replace(string(event), EntryEventType, "dev.bub.tape.event.v1", 1), false},
		{"other specversion", strings.Replace(string(event), `"specversion":"1.0"`, `"specversion":"0.3"`, 1), false},
		{"not JSON data", strings.Replace(string(event), `"datacontenttype":"application/json"`, `"datacontenttype":"text/plain"`, 1), false},
		{"no data", `{"specversion":"1.0","id":"1","source":"/s","type":"` + EntryEventType + `"}`, false},
		{"data not an entry", `{"specversion":"1.0","id":"1","source":"/s","type":"` + EntryEventType + `","data":{"id":"x"}}`, false},
		{"not JSON", "not an entry", false},
	} {
		got, ok := decodeMessage([]byte(c.body))
		if ok != c.ok || ok && !reflect.DeepEqual(got, e[0]) {
			t.Errorf("%s: %v, %v", c.name, got, ok)
		}
	}
}

// FuzzDecodeMessage: the decoder never panics, and whatever it accepts
// (either form) is stored again as an event that the CloudEvents SDK
// validates and that decodes to the same entry.
func FuzzDecodeMessage(f *testing.F) {
	e := MessageEntry(map[string]any{"role": "user", "content": "hi"}, map[string]any{"run_id": "r"})
	e.ID = 3
	f.Add(appendMessage(nil, entryMessage{id: "t:3:k:1", source: "/bub/tape", session: "s"}, e))
	f.Add(appendEntry(nil, e))
	f.Add([]byte(`{"id": 1, "kind": "system", "payload": {}, "timestamp": 12.5}`))
	f.Add([]byte(`{"specversion":"1.0","type":"dev.bub.tape.entry.v1","data":{"id":1,"kind":"k","payload":{},"date":"0000-01-01T00:00:00+01:00"}}`))
	f.Add([]byte(`{"specversion":"1.0"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, ok := decodeMessage(body)
		if !ok {
			return
		}
		again := appendMessage(nil, entryMessage{id: "t:1:k:1", source: "/bub/tape", session: "s:1"}, got)
		validEvent(t, again)
		back, ok := decodeMessage(again)
		if !ok || !reflect.DeepEqual(back, got) {
			t.Fatalf("%s decodes to %v, %v; want %v", again, back, ok, got)
		}
	})
}

// BenchmarkEntryMessage encodes and decodes a typical chat entry in both
// forms: the event a store writes, the bare line it wrote before.
func BenchmarkEntryMessage(b *testing.B) {
	e, err := numberEntries([]Entry{MessageEntry(map[string]any{
		"role": "user", "content": strings.Repeat("lorem ipsum dolor sit amet ", 8),
	}, map[string]any{"run_id": "0199a1b2-0000-7000-8000-000000000001"})}, 12)
	if err != nil {
		b.Fatal(err)
	}
	m := entryMessage{id: "telegram_3a42:12:0123456789abcdef0123456789abcdef:41", source: "/bub/tape/recorder", session: "telegram:42"}
	bodies := map[string][]byte{"event": appendMessage(nil, m, e[0]), "bare": appendEntry(nil, e[0])}
	for _, form := range []string{"bare", "event"} {
		body := bodies[form]
		b.Run("decode/"+form, func(b *testing.B) {
			for b.Loop() {
				if _, ok := decodeMessage(body); !ok {
					b.Fatal("not decoded")
				}
			}
			b.ReportMetric(float64(len(body)), "bytes/msg")
		})
	}
	b.Run("encode/bare", func(b *testing.B) {
		for b.Loop() {
			appendEntry(nil, e[0])
		}
	})
	b.Run("encode/event", func(b *testing.B) {
		for b.Loop() {
			encodeMessage(m, e[0])
		}
	})
}
