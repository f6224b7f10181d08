// Package config is Bub's configuration file, `<home>/config.yaml`, and the
// overlay that gives it its place in the precedence
//
//	flags > BUB_* environment > config file > built-in defaults
//
// Every setting is read through a getenv function (a command binds each
// flag with the BUB_* variable as its default); [Getenv] wraps the process
// environment so a variable that is unset falls back to the file: the
// config key path `a.b_c` answers BUB_A_B_C (`model` → BUB_MODEL,
// `telegram.token` → BUB_TELEGRAM_TOKEN), and the provider maps
// `api_key.<provider>` / `api_base.<provider>` answer
// BUB_<PROVIDER>_API_KEY / BUB_<PROVIDER>_API_BASE. A process calls
// [LoadFor] once at start.
//
// The file lives in the bub home (`--home`, BUB_HOME, default ~/.bub),
// unlike Python Bub's fixed ~/.bub/config.yml: a deployment or a test gets
// its whole state — NATS data, tapes and configuration — from one
// directory, and two homes never share a configuration by accident.
//
// Start with [Load], [Save] and [Config]. [Merge] is the one deep merge of
// configuration fragments (onboard_config uses it). A [Config] never
// prints the values of keys that name a secret (api_key, token, password,
// secret) nor any value of an env or headers map (an MCP server's): see
// [Config.Redacted]. `bub onboard` writes the file; the
// prompters it asks with are in package config/prompt.
package config
