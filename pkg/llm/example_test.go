package llm_test

import (
	"fmt"

	"github.com/bubbus/bub/pkg/llm"
)

func ExampleParseModel() {
	provider, model, _ := llm.ParseModel("ollama:qwen3:8b")
	fmt.Println(provider, model)
	// Output: ollama qwen3:8b
}

func ExampleConfigFromEnv() {
	env := map[string]string{
		"BUB_MODEL":          "openai:gpt-4o-mini",
		"BUB_OPENAI_API_KEY": "sk-do-not-print",
		"BUB_MODEL_TIMEOUT":  "60",
	}
	cfg, err := llm.ConfigFromEnv(func(k string) string { return env[k] })
	fmt.Println(err)
	fmt.Println(cfg)
	// Output:
	// <nil>
	// model=openai:gpt-4o-mini fallback_models=[] api_key= api_keys=[openai] api_base= api_bases=map[] max_tokens=16384 model_timeout=1m0s completion_args=[]
}
