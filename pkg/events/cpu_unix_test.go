//go:build unix

package events_test

import (
	"syscall"
	"testing"
)

// reportCPU starts measuring the process's CPU time; the returned function
// reports it per iteration as cpu-ns/op.
func reportCPU(b *testing.B) (stop func()) {
	start := cpuNanos()
	return func() { b.ReportMetric(float64(cpuNanos()-start)/float64(b.N), "cpu-ns/op") }
}

func cpuNanos() int64 {
	var r syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &r); err != nil {
		return 0
	}
	return r.Utime.Nano() + r.Stime.Nano()
}
