package jsonltape_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/bubbus/bub/examples/plugins/jsonltape"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/tape"
)

func openScope(t *testing.T, p hooks.Plugin) (*hooks.Registry[tape.Store, tape.Context], *hooks.Scope[tape.Store]) {
	t.Helper()
	r := hooks.New[tape.Store, tape.Context]()
	if err := r.Register(p); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	scope, err := r.OpenScope(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { scope.Close(context.Background()) })
	return r, scope
}

func TestPluginProvidesTheStoreOncePerScope(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tapes")
	r, scope := openScope(t, jsonltape.New(dir))
	store := scope.TapeStore()
	s, ok := store.(*jsonltape.Store)
	if !ok {
		t.Fatalf("scope tape store is %T, want *jsonltape.Store", store)
	}
	if r.TapeStore() != store || scope.TapeStore() != store {
		t.Fatal("the scope resolved the store more than once")
	}
	if s.Dir() != dir {
		t.Fatalf("store on %q, want %q", s.Dir(), dir)
	}
	if _, err := store.Append(t.Context(), "session", []tape.Entry{tape.System("hi")}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "session.jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := scope.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Fetch(t.Context(), "session", tape.All()); !errors.Is(err, jsonltape.ErrClosed) {
		t.Fatalf("store after the scope closed: %v, want ErrClosed", err)
	}
	// The next scope gets a new store on the same files.
	next, err := r.OpenScope(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close(t.Context())
	if got := mustFetch(t, next.TapeStore(), "session"); len(got) != 1 {
		t.Fatalf("next scope reads %d entries", len(got))
	}
	rep := r.Report()
	if len(rep) != 1 || rep[0].Hook != hooks.HookProvideTapeStore || rep[0].Impls[0].Description.Detail != "JSONL tape store in "+dir {
		t.Fatalf("report %+v", rep)
	}
}

func TestPluginFromEnv(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{jsonltape.EnvDir: dir}
	_, scope := openScope(t, jsonltape.FromEnv(func(k string) string { return env[k] }))
	if s, ok := scope.TapeStore().(*jsonltape.Store); !ok || s.Dir() != dir {
		t.Fatalf("store from the environment: %#v", scope.TapeStore())
	}
	// Unset: the plugin provides nothing and the next provider answers.
	_, scope = openScope(t, jsonltape.FromEnv(func(string) string { return "" }))
	if scope.TapeStore() != nil {
		t.Fatalf("unconfigured plugin provided %T", scope.TapeStore())
	}
}

func TestPluginReportsABadDirectory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := hooks.New[tape.Store, tape.Context]()
	if err := r.Register(jsonltape.New(filepath.Join(file, "tapes"))); err != nil {
		t.Fatal(err)
	}
	if _, err := r.OpenScope(t.Context()); err == nil {
		t.Fatal("a scope opened on a directory that cannot exist")
	}
}
