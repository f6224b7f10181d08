package freeport

import (
	"net"
	"strconv"
	"testing"
)

// TestPortsAreDistinctFreeAndBelowTheEphemeralRange: the ports can be
// listened on, differ from each other, and lie below the kernel's
// ephemeral range where this machine says what it is.
func TestPortsAreDistinctFreeAndBelowTheEphemeralRange(t *testing.T) {
	ports, err := Ports(20)
	if err != nil {
		t.Fatal(err)
	}
	low := ephemeralLow()
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d twice in %v", p, ports)
		}
		seen[p] = true
		if low > lowest && (p < lowest || p >= low) {
			t.Errorf("port %d outside [%d, %d)", p, lowest, low)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		_ = l.Close()
	}
	if low == 0 {
		t.Logf("no %s here: the kernel picked the ports", rangeFile)
	}
}
