package cli

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"testing"
)

// BUB_CPUPROFILE=<prefix> writes <prefix><command>-<pid>.pprof, a gzipped
// profile, by the time the command returns; unset, nothing is written.
func TestCPUProfileIsWrittenWhenAskedFor(t *testing.T) {
	dir := t.TempDir()
	startCPUProfile("")() // unset: a no-op
	stop := startCPUProfile(filepath.Join(dir, "p-"))
	stop()
	files, _ := filepath.Glob(filepath.Join(dir, "p-*.pprof"))
	if len(files) != 1 {
		t.Fatalf("profiles %v, want one", files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gzip.NewReader(bytes.NewReader(b)); err != nil {
		t.Fatalf("%s is not a gzipped profile: %v", files[0], err)
	}
}
