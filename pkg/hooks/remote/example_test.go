package remote_test

import (
	"fmt"

	"github.com/bubbus/bub/pkg/hooks/remote"
)

func ExampleConfigsFromEnv() {
	env := map[string]string{
		"BUB_INTERCEPTORS":               "audit,policy",
		"BUB_INTERCEPTOR_POLICY_TIMEOUT": "500ms",
		"BUB_INTERCEPTOR_POLICY_FAILURE": "closed",
		"BUB_INTERCEPTOR_POLICY_HOOKS":   "before_tool_call",
		"BUB_INTERCEPTOR_AUDIT_HOOKS":    "after_tool_call,after_llm_call",
	}
	configs, err := remote.ConfigsFromEnv(func(k string) string { return env[k] })
	if err != nil {
		panic(err)
	}
	for _, c := range configs {
		fmt.Printf("%s timeout=%v failure=%q hooks=%v\n", c.Service, c.Timeout, c.Failure, c.Hooks)
	}
	// Output:
	// audit timeout=0s failure="" hooks=[after_tool_call after_llm_call]
	// policy timeout=500ms failure="closed" hooks=[before_tool_call]
}
