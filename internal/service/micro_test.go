package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/service"
	"github.com/bubbus/bub/internal/status"
	"github.com/bubbus/bub/pkg/hooks/remote"
	"github.com/bubbus/bub/pkg/subjects"
)

// discover returns the $SRV.INFO replies of the NATS micro service name.
func discover(t *testing.T, srv *natstest.Server, name string) []micro.Info {
	t.Helper()
	raw, err := remote.Discover(t.Context(), srv.Conn(t), micro.InfoVerb, name, time.Second, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]micro.Info, len(raw))
	for i, r := range raw {
		if err := json.Unmarshal(r, &out[i]); err != nil {
			t.Fatalf("info %s: %v", r, err)
		}
	}
	return out
}

// TestRunAnnouncesTheService: a service run through the shell is the NATS
// micro service <prefix>-<name> with the build's version and its instance
// in the metadata; its status endpoint answers with the instance, the
// version and what the service reports, on the instance's own subject;
// its STATS carry the same status; once the service stops, discovery no
// longer finds it.
func TestRunAnnouncesTheService(t *testing.T) {
	srv := natstest.Start(t)
	names, err := subjects.New("blue")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	up := make(chan struct{})
	spec := func(service.Env) service.Spec {
		return service.Spec{Name: "probe", Short: "A probe service",
			Run: func(ctx context.Context, conn *service.Conn, _ string, _ *slog.Logger) error {
				conn.ReportStatus(func() any { return map[string]int{"answered": 42} })
				close(up)
				<-ctx.Done()
				return nil
			}}
	}
	done := make(chan error, 1)
	vars := map[string]string{"BUB_NATS_URL": srv.URL, "BUB_INSTANCE": "probe.1", "BUB_PREFIX": "blue"}
	go func() {
		done <- service.Exec(ctx, []string{"--home", t.TempDir()}, env(vars), &bytes.Buffer{}, &bytes.Buffer{}, spec)
	}()
	select {
	case <-up:
	case err := <-done:
		t.Fatalf("the service ended: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the service did not start")
	}

	version := service.MicroVersion(cli.Version())
	infos := discover(t, srv, "blue-probe")
	if len(infos) != 1 {
		t.Fatalf("discovered %+v, want one blue-probe", infos)
	}
	in := infos[0]
	if in.Version != version || in.Metadata[status.MetadataInstance] != "probe.1" || in.Metadata[status.MetadataService] != "probe" ||
		in.Metadata[status.MetadataPrefix] != "blue" || in.Metadata[status.MetadataBuild] != cli.Version() || in.ID == "" {
		t.Errorf("info %+v: want version %s and the metadata of instance probe.1", in, version)
	}
	statusSubj := names.ServiceStatus("probe", "probe.1")
	if len(in.Endpoints) != 1 || in.Endpoints[0].Name != status.Endpoint || in.Endpoints[0].Subject != statusSubj {
		t.Errorf("endpoints %+v, want status on %s", in.Endpoints, statusSubj)
	}
	if got := discover(t, srv, "bub-probe"); len(got) != 0 {
		t.Errorf("the default prefix's bub-probe found %+v: deployments mix", got)
	}

	msg, err := srv.Conn(t).Request(statusSubj, nil, 5*time.Second)
	if err != nil {
		t.Fatalf("status request: %v", err)
	}
	var st status.ServiceStatus
	if err := json.Unmarshal(msg.Data, &st); err != nil {
		t.Fatalf("status %s: %v", msg.Data, err)
	}
	if st.Service != "probe" || st.Instance != "probe.1" || st.Version != cli.Version() || string(st.Details) != `{"answered":42}` ||
		st.Started.IsZero() || time.Since(st.Started) > time.Minute {
		t.Errorf("status %s: want probe.1, version %s, a start time and the details it reports", msg.Data, cli.Version())
	}

	raw, err := remote.Discover(t.Context(), srv.Conn(t), micro.StatsVerb, "blue-probe", time.Second, 200*time.Millisecond)
	if err != nil || len(raw) != 1 {
		t.Fatalf("stats: %v %q", err, raw)
	}
	var stats micro.Stats
	if err := json.Unmarshal(raw[0], &stats); err != nil || len(stats.Endpoints) != 1 {
		t.Fatalf("stats %s: %v", raw[0], err)
	}
	var data status.ServiceStatus
	if err := json.Unmarshal(stats.Endpoints[0].Data, &data); err != nil || data.Instance != "probe.1" || string(data.Details) != `{"answered":42}` {
		t.Errorf("the status endpoint's STATS data %s: %v", stats.Endpoints[0].Data, err)
	}
	if stats.Endpoints[0].NumRequests != 1 {
		t.Errorf("status requests counted %d, want 1", stats.Endpoints[0].NumRequests)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := discover(t, srv, "blue-probe"); len(got) != 0 {
		t.Errorf("a stopped service is still discovered: %+v", got)
	}
}
