package embedded

import "testing"

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
