package cli

import (
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestTopologySettings: BUB_REPLICAS, BUB_PLACEMENT_*, BUB_PROVISION,
// BUB_JS_SYNC and BUB_JS_DOMAIN reach the topology, --replicas,
// --no-provision and --js-domain beat them, and bad values are refused
// with the variable named.
func TestTopologySettings(t *testing.T) {
	parse := func(env map[string]string, args ...string) (*Common, error) {
		getenv := func(k string) string { return env[k] }
		var c Common
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		c.Bind(fs, getenv)
		c.BindTopology(fs, getenv)
		if err := fs.Parse(append([]string{"--home", t.TempDir()}, args...)); err != nil {
			return nil, err
		}
		return &c, c.Validate()
	}
	c, err := parse(map[string]string{"BUB_REPLICAS": "3", "BUB_PLACEMENT_CLUSTER": "east", "BUB_PLACEMENT_TAGS": "ssd, az1", "BUB_PROVISION": "false", "BUB_JS_SYNC": "always"})
	if err != nil {
		t.Fatal(err)
	}
	if tp := c.Topology; tp.Replicas != 3 || !tp.NoProvision || tp.Placement == nil || tp.Placement.Cluster != "east" || !slices.Equal(tp.Placement.Tags, []string{"ssd", "az1"}) || c.JSSync != "always" {
		t.Errorf("from the environment: %+v %+v sync %q", tp, tp.Placement, c.JSSync)
	}
	c, err = parse(map[string]string{"BUB_JS_DOMAIN": "hub"})
	if err != nil || c.JSDomain != "hub" {
		t.Errorf("BUB_JS_DOMAIN=hub: domain %q, %v", c.JSDomain, err)
	}
	c, err = parse(map[string]string{"BUB_JS_DOMAIN": "hub"}, "--js-domain", "edge")
	if err != nil || c.JSDomain != "edge" {
		t.Errorf("--js-domain edge: domain %q, %v", c.JSDomain, err)
	}
	if _, err := parse(map[string]string{"BUB_JS_DOMAIN": "a.b"}); err == nil || !strings.Contains(err.Error(), "BUB_JS_DOMAIN") {
		t.Errorf("BUB_JS_DOMAIN=a.b: %v", err)
	}
	c, err = parse(map[string]string{"BUB_REPLICAS": "3"}, "--replicas", "5", "--no-provision")
	if err != nil || c.Topology.Replicas != 5 || !c.Topology.NoProvision {
		t.Errorf("flags: %+v, %v", c.Topology, err)
	}
	for env, want := range map[string]string{"BUB_REPLICAS": "BUB_REPLICAS=\"2\"", "BUB_PROVISION": "BUB_PROVISION=\"maybe\"", "BUB_PLACEMENT_TAGS": "BUB_PLACEMENT_TAGS", "BUB_JS_SYNC": "BUB_JS_SYNC", "BUB_SHUTDOWN_GRACE": "BUB_SHUTDOWN_GRACE=\"soon\": want a positive duration"} {
		bad := map[string]string{"BUB_REPLICAS": "2", "BUB_PROVISION": "maybe", "BUB_PLACEMENT_TAGS": "a,,b", "BUB_JS_SYNC": "sometimes", "BUB_SHUTDOWN_GRACE": "soon"}[env]
		if _, err := parse(map[string]string{env: bad}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s=%s: %v", env, bad, err)
		}
	}
	if _, err := parse(nil, "--replicas", "4"); err == nil || !strings.Contains(err.Error(), "replicas must be 1, 3 or 5") {
		t.Errorf("--replicas 4: %v", err)
	}
}
