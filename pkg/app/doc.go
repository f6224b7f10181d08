// Package app is the public entry point of a Bub build: [Main] runs the
// whole `bub` command — every subcommand, including the services
// (`bub worker`, `bub ingress`, `bub recorder`, `bub gateway`) — with the
// given plugins registered after the builtin plugin, so they take
// precedence by the LIFO rule. A custom distribution is a short main.go in
// its own module:
//
//	package main
//
//	import (
//		"github.com/bubbus/bub/pkg/app"
//		"example.com/myplugin"
//	)
//
//	func main() { app.Main(myplugin.New()) }
//
// cmd/bub is app.Main() itself. [Run] runs the same command in-process for
// tests. Writing a plugin? See docs/plugins.md and package hooks; to test
// one, package hooks/hookstest.
package app
