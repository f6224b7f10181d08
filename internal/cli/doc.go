// Package cli holds what every Bub command shares: the common flags bound
// to BUB_* environment variables (flag > env > default), logging setup, and
// the thin main wrapper that turns signals into context cancellation.
//
// Start with [Common] and [Main]. Looking for the commands themselves? See
// internal/service (the shell of the service binaries cmd/worker, …),
// internal/bubcmd (the bub CLI) and cmd/*.
package cli
