package events

import "github.com/google/uuid"

// NewID returns a fresh UUIDv7 string: time-ordered and unique, used for
// event, envelope and run ids.
func NewID() string { return uuid.Must(uuid.NewV7()).String() }
