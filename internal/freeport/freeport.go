package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// lowest is the lowest port [Ports] picks: below it live well-known and
// registered services.
const lowest = 10000

// rangeFile holds the kernel's ephemeral port range ("32768\t60999").
const rangeFile = "/proc/sys/net/ipv4/ip_local_port_range"

// Ports returns n distinct loopback ports that nothing listened on a
// moment ago, each outside the ephemeral range when the range is known.
func Ports(n int) ([]int, error) {
	high := ephemeralLow()
	var held []net.Listener
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for len(ports) < n {
		l, err := listen(high)
		if err != nil {
			return nil, err
		}
		held = append(held, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Addr returns "127.0.0.1:<port>" for one port of [Ports].
func Addr() (string, error) {
	ports, err := Ports(1)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])), nil
}

// listen listens on a random free port in [lowest, high), or on one the
// kernel picks when that range is empty or full.
func listen(high int) (net.Listener, error) {
	for tries := 0; high > lowest && tries < 100; tries++ {
		p := lowest + rand.IntN(high-lowest)
		if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
			return l, nil
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("freeport: %w", err)
	}
	return l, nil
}

// ephemeralLow returns the lowest port of the kernel's ephemeral range, 0
// when it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile(rangeFile)
	if err != nil {
		return 0
	}
	low, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\t")
	p, err := strconv.Atoi(strings.TrimSpace(low))
	if err != nil {
		return 0
	}
	return p
}
