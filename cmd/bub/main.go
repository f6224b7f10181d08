// Command bub is the all-in-one Bub CLI: `bub run`, `bub up`, `bub tape`,
// `bub events tail`, `bub hooks`, the services and more. See `bub --help`.
// A custom build with plugins is the same one line with arguments; see
// package app.
package main

import "github.com/bubbus/bub/pkg/app"

func main() { app.Main() }
