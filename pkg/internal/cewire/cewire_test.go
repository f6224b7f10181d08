package cewire_test

import (
	"testing"
	"time"

	"github.com/bubbus/bub/pkg/internal/cewire"
	"github.com/bubbus/bub/pkg/internal/jsonesc"
)

// TestAppendHead: the head in the SDK's attribute order, subject only when
// set, time in UTC, strings escaped as asked.
func TestAppendHead(t *testing.T) {
	at := time.Date(2026, 12, 1, 17, 0, 0, 500, time.FixedZone("CET", 3600))
	for _, c := range []struct {
		h    cewire.Head
		want string
	}{
		{cewire.Head{ID: "e1", Source: "/bub/worker/w", Type: "dev.bub.x.v1", Subject: "s\"1", DataContentType: "application/json", Time: at},
			`{"specversion":"1.0","id":"e1","source":"/bub/worker/w","type":"dev.bub.x.v1","subject":"s\"1","datacontenttype":"application/json","time":"2026-12-01T16:00:00.0000005Z"`},
		{cewire.Head{ID: "e2", Source: "/s", Type: "t", DataContentType: "application/json", Time: at},
			`{"specversion":"1.0","id":"e2","source":"/s","type":"t","datacontenttype":"application/json","time":"2026-12-01T16:00:00.0000005Z"`},
	} {
		if got := string(cewire.AppendHead(nil, jsonesc.SDK, c.h)); got != c.want {
			t.Errorf("AppendHead(%+v) =\n%s\nwant\n%s", c.h, got, c.want)
		}
	}
	if got := string(cewire.AppendAttr([]byte("x"), jsonesc.Python, "runid", "r\f")); got != `x,"runid":"r\f"` {
		t.Errorf("AppendAttr = %s", got)
	}
}
