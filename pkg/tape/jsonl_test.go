package tape_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/bubbus/bub/pkg/tape"
)

func TestWriteJSONLFormat(t *testing.T) {
	e := tape.Entry{
		ID:   3,
		Kind: tape.KindEvent,
		Payload: map[string]any{
			"name": "x", "data": map[string]any{
				"text": "café <b>&</b> \"q\" \\ \n\t\u0001\u2028 😀", "n": 1.0, "f": 1.5, "big": 1e21, "tiny": 1e-7,
				"list": []any{true, false, nil}, "empty": map[string]any{}, "none": []any{},
			},
		},
		Meta: map[string]any{"run_id": "r"},
		Date: "2026-05-14T10:11:12+00:00",
	}
	var buf bytes.Buffer
	if err := tape.WriteJSONL(&buf, []tape.Entry{e, {ID: 4, Kind: "system", Date: "d"}}); err != nil {
		t.Fatal(err)
	}
	want := `{"id": 3, "kind": "event", "payload": {"data": {"big": 1e+21, "empty": {}, "f": 1.5, "list": [true, false, null], "n": 1, "none": [], ` +
		`"text": "café <b>&</b> \"q\" \\ \n\t\u0001` + "\u2028" + ` 😀", "tiny": 1e-7}, "name": "x"}, "meta": {"run_id": "r"}, "date": "2026-05-14T10:11:12+00:00"}` + "\n" +
		`{"id": 4, "kind": "system", "payload": {}, "meta": {}, "date": "d"}` + "\n"
	if buf.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

func TestJSONLRoundTripIsByteIdentical(t *testing.T) {
	s := tape.NewMemoryStore()
	stored, err := s.Append(t.Context(), "t", []tape.Entry{
		tape.System("sys"),
		tape.MessageEntry(map[string]any{"role": "user", "content": "日本語 and ünïcödé", "n": 12345678901}),
		tape.Anchor("a", map[string]any{"nested": []any{1, 2.5, "x", map[string]any{"z": nil, "a": true}}}),
		tape.Event("e", map[string]any{"invalid utf8": "a\xffb"}, map[string]any{"context": false}),
	})
	if err != nil {
		t.Fatal(err)
	}
	var first bytes.Buffer
	if err := tape.WriteJSONL(&first, stored); err != nil {
		t.Fatal(err)
	}
	imported, err := tape.ReadJSONL(bytes.NewReader(first.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var second bytes.Buffer
	if err := tape.WriteJSONL(&second, imported); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Bytes(), second.Bytes()) {
		t.Fatalf("export differs after import:\n%s\n%s", first.String(), second.String())
	}
	if len(imported) != len(stored) || imported[1].Payload["content"] != "日本語 and ünïcödé" {
		t.Fatalf("imported %#v", imported)
	}
}

func TestReadJSONLSkipsWhatBubSkips(t *testing.T) {
	input := strings.Join([]string{
		`{"id": 1, "kind": "message", "payload": {"content": "ok"}, "meta": {"m": 1}, "date": "2026-01-01T00:00:00+00:00"}`,
		``,
		`   `,
		`not json`,
		`[1, 2]`,
		`{"id": 1.0, "kind": "message", "payload": {}}`,
		`{"id": "2", "kind": "message", "payload": {}}`,
		`{"kind": "message", "payload": {}}`,
		`{"id": 2, "kind": 5, "payload": {}}`,
		`{"id": 2, "kind": "message", "payload": []}`,
		`{"id": 2, "kind": "message"}`,
		`{"id": 2, "kind": "message", "payload": {}, "date": 5}`,
		`{"id": 3, "kind": "event", "payload": {"name": "legacy"}, "meta": "bad", "timestamp": 1700000000.25}`,
		`{"id": 4, "kind": "event", "payload": {"name": "no date"}}`,
		`{"id": 5, "kind": "event", "payload": {}, "timestamp": "x"}`,
		`{"id": 6, "kind": "x", "payload": {}, "date": "2026-01-01"}`, // last line without newline
	}, "\n")
	got, err := tape.ReadJSONL(strings.NewReader(input))
	if err != nil {
		t.Fatal(err)
	}
	want := []tape.Entry{
		{ID: 1, Kind: "message", Payload: map[string]any{"content": "ok"}, Meta: map[string]any{"m": 1.0}, Date: "2026-01-01T00:00:00+00:00"},
		{ID: 3, Kind: "event", Payload: map[string]any{"name": "legacy"}, Meta: map[string]any{}, Date: "2023-11-14T22:13:20.250000+00:00"},
		{ID: 4, Kind: "event", Payload: map[string]any{"name": "no date"}, Meta: map[string]any{}, Date: "1970-01-01T00:00:00+00:00"},
		{ID: 6, Kind: "x", Payload: map[string]any{}, Meta: map[string]any{}, Date: "2026-01-01"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %#v\nwant %#v", got, want)
	}
}

// FuzzReadJSONL feeds arbitrary tape files to the decoder: it never fails
// on content (only read errors are returned), and what it keeps exports
// to a canonical form that imports and exports to the same bytes again.
func FuzzReadJSONL(f *testing.F) {
	f.Add([]byte(`{"id": 1, "kind": "message", "payload": {"content": "ok"}, "meta": {}, "date": "2026-01-01T00:00:00+00:00"}` + "\n"))
	f.Add([]byte(`{"id": 3, "kind": "event", "payload": {"name": "legacy"}, "meta": "bad", "timestamp": 1700000000.25}`))
	f.Add([]byte("not json\n\n{\"id\": 2, \"kind\": \"x\", \"payload\": {\"a\": [1, 2.5e300, null]}}\n"))
	f.Add([]byte(`{"id": 4, "kind": "event", "payload": {"cost": NaN, "s": "NaN \" Infinity", "r": [-Infinity, Infinity]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := tape.ReadJSONL(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("content error from an in-memory reader: %v", err)
		}
		var first bytes.Buffer
		if err := tape.WriteJSONL(&first, entries); err != nil {
			t.Fatal(err)
		}
		again, err := tape.ReadJSONL(bytes.NewReader(first.Bytes()))
		if err != nil || len(again) != len(entries) {
			t.Fatalf("re-import kept %d of %d entries: %v\n%s", len(again), len(entries), err, first.Bytes())
		}
		var second bytes.Buffer
		if err := tape.WriteJSONL(&second, again); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first.Bytes(), second.Bytes()) {
			t.Fatalf("export is not canonical:\n%s\n%s", first.Bytes(), second.Bytes())
		}
	})
}
