package mcptools_test

import (
	"fmt"

	"github.com/bubbus/bub/pkg/tools/mcptools"
)

// The servers of BUB_MCP_SERVERS (or config.yaml's mcp.servers), sorted
// by name; their text forms never show env or header values.
func ExampleParseServers() {
	servers, err := mcptools.ParseServers([]byte(`{
		"search": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer sk-123456789"}},
		"files": {"command": "mcp-server-files", "args": ["--root", "/srv"], "env": {"FILES_TOKEN": "tok-123456789"}}
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range servers {
		fmt.Println(s, s.Redacted().Env, s.Redacted().Headers)
	}
	// Output:
	// files (stdio mcp-server-files --root /srv env FILES_TOKEN) map[FILES_TOKEN:[redacted]] map[]
	// search (http https://mcp.example.com/mcp header Authorization) map[] map[Authorization:[redacted]]
}
