package embedded

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bubbus/bub/internal/natsx"
)

// TestInProcessAndListener: without Listen the server takes in-process
// connections only (no client URL); with one it also listens.
func TestEmbeddedInProcessAndListener(t *testing.T) {
	for _, listen := range []string{"", "127.0.0.1:0"} {
		e, err := Start(Config{StoreDir: t.TempDir(), Listen: listen})
		if err != nil {
			t.Fatal(err)
		}
		nc, err := e.Connect("test")
		if err != nil {
			t.Fatal(err)
		}
		if got := e.ClientURL() != ""; got != (listen != "") {
			t.Errorf("listen %q: ClientURL %q", listen, e.ClientURL())
		}
		if err := nc.Flush(); err != nil {
			t.Errorf("listen %q: flush: %v", listen, err)
		}
		nc.Close()
		e.Shutdown()
	}
}

// TestEmbeddedSync: BUB_JS_SYNC's settings reach the server's JetStream:
// always, an interval, or nats-server's 2m default.
func TestEmbeddedSync(t *testing.T) {
	for _, c := range []struct {
		cfg          Config
		always       bool
		wantInterval time.Duration
	}{
		{Config{}, false, 2 * time.Minute},
		{Config{SyncInterval: time.Second}, false, time.Second},
		{Config{SyncAlways: true}, true, 2 * time.Minute},
	} {
		c.cfg.StoreDir = t.TempDir()
		e, err := Start(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		js := e.srv.JetStreamConfig()
		if js.SyncAlways != c.always || js.SyncInterval != c.wantInterval {
			t.Errorf("%+v: sync always %v interval %v", c.cfg, js.SyncAlways, js.SyncInterval)
		}
		e.Shutdown()
	}
}

// TestEmbeddedMaxPayload: clients of the embedded server may publish up
// to natsx.MaxPayload (8 MiB, not nats-server's 1 MiB), unless the server's
// configuration file sets max_payload.
func TestEmbeddedMaxPayload(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(conf, []byte("max_payload: 2MB\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cfg  Config
		want int64
	}{
		{Config{}, natsx.MaxPayload},
		{Config{ConfigFile: conf}, 2 << 20},
	} {
		c.cfg.StoreDir = t.TempDir()
		e, err := Start(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		nc, err := e.Connect("test")
		if err != nil {
			t.Fatal(err)
		}
		if got := nc.MaxPayload(); got != c.want {
			t.Errorf("config file %q: max payload %d, want %d", c.cfg.ConfigFile, got, c.want)
		}
		if err := nc.Publish("big", make([]byte, c.want-1024)); err != nil {
			t.Errorf("config file %q: publishing just under the limit: %v", c.cfg.ConfigFile, err)
		}
		nc.Close()
		e.Shutdown()
	}
}
