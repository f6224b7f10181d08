//go:build !unix

package jsonltape

import (
	"context"
	"errors"
	"fmt"
)

// fileLock is not available: the store needs flock(2).
type fileLock struct{}

func lockPath(ctx context.Context, path string, exclusive bool) (*fileLock, error) {
	return nil, fmt.Errorf("locking %s: %w", path, errors.ErrUnsupported)
}

func (l *fileLock) lock(ctx context.Context, exclusive bool) error { return errors.ErrUnsupported }

func (l *fileLock) unlock() {}
