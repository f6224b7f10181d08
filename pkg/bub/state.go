package bub

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Well-known state keys (Bub's TurnState keys). Keys starting with "_" are
// runtime-only and never leave the process.
const (
	StateSessionID       = "session_id"
	StateContext         = "context"
	StateModel           = "model"
	StateReasoningEffort = "reasoning_effort"
	StateWorkspace       = "_runtime_workspace"
	StateThreadID        = "_runtime_thread_id"
	StateAllowedSkills   = "allowed_skills"
)

// State is the mutable turn state shared by reference by every stage of one
// turn, by tools and by interception hooks. It is safe for concurrent use
// because tool calls of one model response run concurrently.
type State struct {
	mu sync.RWMutex
	m  map[string]any
}

// NewState returns a state holding a copy of m.
func NewState(m map[string]any) *State {
	s := &State{m: make(map[string]any, len(m)+4)}
	maps.Copy(s.m, m)
	return s
}

// Get returns the value of key and whether it is present.
func (s *State) Get(key string) (any, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v, ok := s.m[key]
	return v, ok
}

// String returns the value of key when it is a string, else "".
func (s *State) String(key string) string {
	v, _ := s.Get(key)
	str, _ := v.(string)
	return str
}

// Set stores value under key.
func (s *State) Set(key string, value any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]any{}
	}
	s.m[key] = value
}

// SetDefault stores value under key unless key is present.
func (s *State) SetDefault(key string, value any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]any{}
	}
	if _, ok := s.m[key]; !ok {
		s.m[key] = value
	}
}

// Delete removes key.
func (s *State) Delete(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
}

// Merge copies every entry of m into the state, overwriting existing keys.
func (s *State) Merge(m map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]any{}
	}
	maps.Copy(s.m, m)
}

// Snapshot returns a shallow copy of the state.
func (s *State) Snapshot() map[string]any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return maps.Clone(s.m)
}

// Public returns a shallow copy without runtime-only keys (those starting
// with "_"): the part of the state that may cross a process boundary.
func (s *State) Public() map[string]any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]any, len(s.m))
	for k, v := range s.m {
		if !strings.HasPrefix(k, "_") {
			out[k] = v
		}
	}
	return out
}

// MarshalJSON encodes the public part of the state.
func (s *State) MarshalJSON() ([]byte, error) { return json.Marshal(s.Public()) }

// Workspace returns the workspace directory of the turn: the
// _runtime_workspace key when it is a non-blank string (with "~" expanded,
// made absolute), otherwise the current working directory.
func (s *State) Workspace() string {
	ws := strings.TrimSpace(s.String(StateWorkspace))
	if ws == "" {
		wd, _ := os.Getwd()
		return wd
	}
	if ws == "~" || strings.HasPrefix(ws, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			ws = filepath.Join(home, strings.TrimPrefix(ws, "~"))
		}
	}
	if abs, err := filepath.Abs(ws); err == nil {
		return abs
	}
	return ws
}
