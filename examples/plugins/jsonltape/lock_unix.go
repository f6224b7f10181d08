//go:build unix

package jsonltape

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// lockRetry is how often a lock held by another process is tried again.
const lockRetry = 2 * time.Millisecond

// fileLock is a held flock(2) lock on a tape's lock file.
type fileLock struct{ f *os.File }

// lockPath takes a flock(2) lock on the file at path, creating it, shared
// or exclusive. It waits while another process holds a conflicting lock,
// until ctx ends.
func lockPath(ctx context.Context, path string, exclusive bool) (*fileLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening lock file: %w", err)
	}
	l := &fileLock{f: f}
	if err := l.lock(ctx, exclusive); err != nil {
		f.Close()
		return nil, err
	}
	return l, nil
}

// lock takes (or converts to) the shared or exclusive lock.
func (l *fileLock) lock(ctx context.Context, exclusive bool) error {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	var retry *time.Ticker
	for {
		err := syscall.Flock(int(l.f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			return fmt.Errorf("locking %s: %w", l.f.Name(), err)
		}
		if retry == nil {
			retry = time.NewTicker(lockRetry)
			defer retry.Stop()
		}
		select {
		case <-retry.C:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the lock on %s: %w", l.f.Name(), ctx.Err())
		}
	}
}

// unlock releases the lock (closing the file releases it).
func (l *fileLock) unlock() { l.f.Close() }
