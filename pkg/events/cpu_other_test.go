//go:build !unix

package events_test

import "testing"

// reportCPU reports nothing where getrusage is unavailable.
func reportCPU(*testing.B) (stop func()) { return func() {} }
