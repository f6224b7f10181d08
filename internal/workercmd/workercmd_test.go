package workercmd

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/bubbus/bub/internal/service"
)

// TestTapeCacheSize: --tape-cache or BUB_TAPE_CACHE sizes the worker's
// tape cache in MiB, 8 by default, 0 for none; a value that is not a whole
// number of MiB, or is negative, is refused with what was given, as are
// the worker's other numbers from the environment (they fell back to
// their defaults without a word).
func TestTapeCacheSize(t *testing.T) {
	for _, c := range []struct {
		env  string
		args []string
		want int
		err  string
	}{
		{want: 8},
		{env: "256", want: 256},
		{env: "0", want: 0},
		{env: "256", args: []string{"--tape-cache=64"}, want: 64},
		{env: "lots", err: `BUB_TAPE_CACHE="lots": want a whole number, 0 or more`},
		{env: "-1", err: `BUB_TAPE_CACHE="-1": want a whole number, 0 or more`},
		{args: []string{"--tape-cache=-5"}, err: "tape cache of -5 MiB"},
	} {
		o, err := load(t, envTapeCache, c.env, c.args...)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("env %q, args %v: error %v, want one containing %q", c.env, c.args, err, c.err)
		case c.err == "" && (err != nil || o.TapeCacheMiB != c.want):
			t.Errorf("env %q, args %v: %d MiB (%v), want %d", c.env, c.args, o.TapeCacheMiB, err, c.want)
		}
	}
}

// TestWorkerNumbersFromTheEnvironment: BUB_WORKER_CONCURRENCY and
// BUB_MAX_STEPS that are not whole numbers of 0 or more are refused,
// naming the variable and the value.
func TestWorkerNumbersFromTheEnvironment(t *testing.T) {
	for _, c := range []struct{ key, value string }{
		{"BUB_WORKER_CONCURRENCY", "1k"},
		{"BUB_WORKER_CONCURRENCY", "-3"},
		{"BUB_MAX_STEPS", "ten"},
	} {
		want := fmt.Sprintf("%s=%q: want a whole number, 0 or more", c.key, c.value)
		if _, err := load(t, c.key, c.value); err == nil || err.Error() != want {
			t.Errorf("%s=%s: error %v, want %q", c.key, c.value, err, want)
		}
	}
}

// load binds and loads the worker options with key=value as the only
// environment variable ("" for none) and args as the flags.
func load(t *testing.T, key, value string, args ...string) (Options, error) {
	t.Helper()
	getenv := func(k string) string {
		if k == key {
			return value
		}
		return ""
	}
	var o Options
	fs := pflag.NewFlagSet("worker", pflag.ContinueOnError)
	Bind(fs, &o, service.Env{Getenv: getenv, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o, Load(getenv, &o)
}
