package remote_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/hooks/remote"
)

func TestConfigsFromEnv(t *testing.T) {
	env := map[string]string{
		"BUB_INTERCEPTORS":                  " audit, policy-v2 ,",
		"BUB_INTERCEPTOR_AUDIT_TIMEOUT":     "500ms",
		"BUB_INTERCEPTOR_POLICY_V2_FAILURE": "Closed",
		"BUB_INTERCEPTOR_POLICY_V2_HOOKS":   "before_tool_call, after_tool_call",
	}
	got, err := remote.ConfigsFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	want := []remote.Config{
		{Service: "audit", Timeout: 500 * time.Millisecond},
		{Service: "policy-v2", Failure: remote.FailClosed, Hooks: []hooks.Hook{hooks.HookBeforeToolCall, hooks.HookAfterToolCall}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("configs = %+v, want %+v", got, want)
	}
	none, err := remote.ConfigsFromEnv(func(string) string { return "" })
	if err != nil || none != nil {
		t.Errorf("no interceptors: %v, %v", none, err)
	}
}

func TestConfigsFromEnvErrors(t *testing.T) {
	env := map[string]string{
		"BUB_INTERCEPTORS":               "audit,policy,a.b,policy_x,policy-x",
		"BUB_INTERCEPTOR_AUDIT_TIMEOUT":  "fast",
		"BUB_INTERCEPTOR_POLICY_FAILURE": "sometimes",
		"BUB_INTERCEPTOR_POLICY_HOOKS":   "before_tool_call,run_model",
	}
	_, err := remote.ConfigsFromEnv(func(k string) string { return env[k] })
	if err == nil {
		t.Fatal("bad configuration accepted")
	}
	for _, want := range []string{
		`BUB_INTERCEPTOR_AUDIT_TIMEOUT="fast": want a positive duration`,
		`BUB_INTERCEPTOR_POLICY_FAILURE: failure policy "sometimes": want open or closed`,
		`BUB_INTERCEPTOR_POLICY_HOOKS: hook "run_model" is not one an interceptor can serve`,
		`interceptor service name "a.b"`,
		`"policy_x" and "policy-x" share the variables BUB_INTERCEPTOR_POLICY_X_*`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []remote.Config{
		{},
		{Service: "a b"},
		{Service: "ok", Timeout: -time.Second},
		{Service: "ok", Failure: "maybe"},
		{Service: "ok", Hooks: []hooks.Hook{hooks.HookProvideTapeStore}},
	} {
		if c.Validate() == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if err := (remote.Config{Service: "ok_1-x", Failure: remote.FailClosed, Hooks: remote.Hooks()}).Validate(); err != nil {
		t.Errorf("valid config rejected: %v", err)
	}
}
