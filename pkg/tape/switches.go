package tape

// The tape events that switch a session's model settings from the next
// turn on (the model and reasoning_effort commands record them); their
// data is {model} and {reasoning_effort}.
const (
	EventModelSwitch           = "model_switch"
	EventReasoningEffortSwitch = "reasoning_effort_switch"
)

// Switches are a session's latest model and reasoning-effort switches
// (Bub's load_state reads them from the tape); "" means none. Encoded as
// JSON, it is the session's switches value in the state bucket.
type Switches struct {
	Model           string `json:"model,omitempty"`
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
}

// Apply records the switch e makes, when it is a switch event, and
// reports whether it was one.
func (s *Switches) Apply(e Entry) bool {
	if e.Kind != KindEvent {
		return false
	}
	data, _ := e.Payload["data"].(map[string]any)
	switch e.Payload["name"] {
	case EventModelSwitch:
		s.Model, _ = data["model"].(string)
	case EventReasoningEffortSwitch:
		s.ReasoningEffort, _ = data["reasoning_effort"].(string)
	default:
		return false
	}
	return true
}
