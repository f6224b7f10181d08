package hooks_test

import (
	"testing"

	"github.com/bubbus/bub/pkg/hooks/hookstest"
)

// The dispatch benchmarks over three in-process plugins live in
// hookstest, where `bub bench` (figure P1) runs the same functions. Goal
// for the firstresult (ResolveSession) and broadcast (DispatchOutbound)
// dispatch: at most 60 ns/op and 0 allocs/op.

func BenchmarkResolveSession3(b *testing.B)   { hookstest.BenchmarkResolveSession(b) }
func BenchmarkDispatchOutbound3(b *testing.B) { hookstest.BenchmarkDispatchOutbound(b) }
func BenchmarkLoadState3(b *testing.B)        { hookstest.BenchmarkLoadState(b) }
func BenchmarkBeforeToolCall3(b *testing.B)   { hookstest.BenchmarkBeforeToolCall(b) }
