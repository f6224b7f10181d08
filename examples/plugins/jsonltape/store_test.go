package jsonltape_test

import (
	"context"
	"testing"

	"github.com/bubbus/bub/examples/plugins/jsonltape"
	"github.com/bubbus/bub/pkg/tape"
	"github.com/bubbus/bub/pkg/tape/tapetest"
)

func newStore(t *testing.T, dir string) *jsonltape.Store {
	t.Helper()
	s, err := jsonltape.NewStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func TestStoreConformance(t *testing.T) {
	tapetest.Run(t, func(t *testing.T) tape.Store { return newStore(t, t.TempDir()) })
}
