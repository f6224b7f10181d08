package tape_test

import (
	"testing"

	"github.com/bubbus/bub/pkg/tape"
	"github.com/bubbus/bub/pkg/tape/tapetest"
)

func TestMemoryStoreConformance(t *testing.T) {
	tapetest.Run(t, func(t *testing.T) tape.Store { return tape.NewMemoryStore() })
}

func TestForkConformance(t *testing.T) {
	tapetest.Run(t, func(t *testing.T) tape.Store { return tape.NewFork(tape.NewMemoryStore()) })
}
