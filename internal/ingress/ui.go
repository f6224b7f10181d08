package ingress

import (
	"embed"
	"net/http"
)

// console holds the web console's static files under ui/ (plain HTML, CSS
// and JavaScript; no build step), served at GET /ui/.
//
//go:embed ui
var console embed.FS

// consoleHandler serves the console. Its files hold no data: everything
// the console shows comes from the JSON API, which the bearer token
// protects, so the page loads without the token and asks for it.
func consoleHandler() http.Handler { return http.FileServerFS(console) }
