package providers_test

import (
	"context"
	"fmt"

	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/llm/providers"
)

// The zero config routes to the built-in echo model, so this needs no key.
func ExampleNewRouter() {
	r, err := providers.NewRouter(llm.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := r.Complete(context.Background(), llm.Call{
		Messages: []llm.Message{{Role: llm.RoleUser, Content: llm.Text("hello, echo")}},
	}, nil)
	fmt.Println(resp.Text, err)
	// Output: hello, echo <nil>
}
