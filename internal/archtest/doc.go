// Package archtest holds the architecture test: it loads the module's
// import graph with `go list` and fails when an import breaks the layer
// rules of docs/ARCHITECTURE.md. The rules are the layer table of that
// document, which the test parses, so the document and the check cannot
// drift apart.
//
// The package has no code of its own; run it with
// `go test ./internal/archtest`. Looking for the rules themselves? See
// docs/ARCHITECTURE.md, section "Layers".
package archtest
