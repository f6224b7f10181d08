package bubcmd

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/internal/recordercmd"
	"github.com/bubbus/bub/internal/service"
	"github.com/bubbus/bub/pkg/subjects"
)

// TestProvision: `bub provision --dry-run --json` on an empty server
// decodes, lists every stream, bucket and consumer as to be created and
// creates nothing; `bub provision` creates them, and a second run finds
// them unchanged.
func TestProvision(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.JetStream(t)
	flags := []string{"--nats", s.URL, "--home", t.TempDir()}
	out, err := runBub(t, nil, append([]string{"provision", "--dry-run", "--json", "--gateway-channel", "telegram"}, flags...)...)
	if err != nil {
		t.Fatal(err, out)
	}
	var got provisionOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("--json output does not decode: %v\n%s", err, out)
	}
	if !got.DryRun || len(got.Changes) != 13 || got.Changes[0].Name != "BUB_INBOUND" || got.Changes[12].Name != "gateway-telegram" {
		t.Errorf("dry run: %s", out)
	}
	for _, c := range got.Changes {
		if c.Action != natsx.ActionCreate {
			t.Errorf("dry run on an empty server: %s", c)
		}
	}
	if n := len(js.StreamNames(t.Context()).Name()); n != 0 {
		t.Errorf("the dry run created %d streams", n)
	}
	out, err = runBub(t, nil, append([]string{"provision"}, flags...)...)
	if err != nil || !strings.Contains(out, "create stream BUB_INBOUND\n") || !strings.Contains(out, "create consumer recorder on BUB_EVENTS\n") {
		t.Fatalf("provision: %v\n%s", err, out)
	}
	out, err = runBub(t, nil, append([]string{"provision", "--dry-run"}, flags...)...)
	if err != nil || strings.Contains(out, "would") || !strings.Contains(out, "unchanged stream BUB_TAPES\n") {
		t.Errorf("dry run after provisioning: %v\n%s", err, out)
	}
}

// TestServiceWithProvisioningOff: a service started with
// --no-provision against an empty server exits at once with an error
// naming the missing inbound stream; after `bub provision` it starts and
// serves until stopped.
func TestServiceWithProvisioningOff(t *testing.T) {
	s := natstest.Start(t)
	home := t.TempDir()
	getenv := func(k string) string { return map[string]string{"BUB_HOME": home, "BUB_PROVISION": "false"}[k] }
	run := func(ctx context.Context) error {
		return service.Exec(ctx, []string{"--nats", s.URL}, getenv, &strings.Builder{}, &strings.Builder{}, recordercmd.Service)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := run(ctx)
	if err == nil || !strings.Contains(err.Error(), "stream BUB_INBOUND is missing") || !strings.Contains(err.Error(), "BUB_PROVISION=false") {
		t.Fatalf("recorder on an empty server with provisioning off: %v", err)
	}
	if _, err := runBub(t, nil, "provision", "--nats", s.URL, "--home", home); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if err := run(ctx); err != nil {
		t.Errorf("recorder with provisioning off after bub provision: %v", err)
	}
}

// TestTapeShowNeverChangesTheTopology: `bub tape show` against a running
// cluster binds to the tapes stream; an operator's settings on it (here a
// description and a per-subject limit) survive.
func TestTapeShowNeverChangesTheTopology(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.JetStream(t)
	ctx := t.Context()
	if err := natsx.EnsureTopology(ctx, js, subjects.Default(), natsx.Topology{}); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "BUB_TAPES")
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.Description, cfg.MaxMsgsPerSubject = "managed by the operator", 100000
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"tape", "show", "s1"}, {"tape", "list"}, {"tape", "export", "s1"}, {"status"}} {
		if out, err := runBub(t, nil, append(args, "--nats", s.URL, "--home", t.TempDir())...); err != nil {
			t.Fatalf("bub %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		st, err := js.Stream(ctx, "BUB_TAPES")
		if err != nil {
			t.Fatal(err)
		}
		if got := st.CachedInfo().Config; got.Description != cfg.Description || got.MaxMsgsPerSubject != 100000 {
			t.Fatalf("bub %s changed the tapes stream: description %q, max msgs per subject %d", strings.Join(args, " "), got.Description, got.MaxMsgsPerSubject)
		}
	}
}
