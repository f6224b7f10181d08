package recording

import (
	"fmt"
	"slices"

	"github.com/bubbus/bub/pkg/events"
)

// Event is one recorded event of a run: its seq (the CloudEvent's seq
// extension, 1, 2, 3, … per run), its CloudEvent type and its payload as
// [events.DecodePayload] returns it (*events.LLMCallFinishedData, …).
type Event struct {
	Seq     int64
	Type    string
	Payload any
}

// Run is the index of one recorded run: what each of its steps recorded.
// It is read-only once built and safe for concurrent use.
type Run struct {
	// ID is the recorded run's id.
	ID string
	// Started is the run's run.started payload.
	Started *events.RunStartedData
	// Finished is set when the recording holds the run's run.finished.
	Finished *events.RunFinishedData
	events   []Event
	steps    map[int]*Step
}

// Step is what one step of a recorded run recorded; a nil field is an
// event the step never recorded (it was interrupted before).
type Step struct {
	Number  int
	Started *events.StepStartedData
	// Pending is the messages.pending before the model call, PendingEnd
	// the one at the step's end.
	Pending, PendingEnd *events.MessagesPendingData
	LLMStarted          *events.LLMCallStartedData
	LLMFinished         *events.LLMCallFinishedData
	// Tools are the step's tool calls by call id.
	Tools    map[string]*ToolCall
	Chat     *events.ChatFinishedData
	Finished *events.StepFinishedData
}

// ToolCall is one recorded tool call: started, and finished when its
// result was recorded.
type ToolCall struct {
	Started  *events.ToolCallStartedData
	Finished *events.ToolCallFinishedData
}

// New indexes the events of run id. They may come in any order; their
// seqs must be 1…n without a gap or a repeat (a gap is an event that is
// still to be stored or was lost: answering from a recording with a hole
// would skip what the hole held), and the first step event must follow
// run.started.
func New(id string, evs []Event) (*Run, error) {
	evs = slices.Clone(evs)
	slices.SortFunc(evs, func(a, b Event) int { return int(a.Seq - b.Seq) })
	r := &Run{ID: id, events: evs, steps: map[int]*Step{}}
	var cur *Step
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			return nil, fmt.Errorf("recording: run %s: event seq %d where %d was due", id, e.Seq, i+1)
		}
		switch p := e.Payload.(type) {
		case *events.RunStartedData:
			r.Started = p
		case *events.RunFinishedData:
			r.Finished = p
		case *events.StepStartedData:
			cur = &Step{Number: p.Step, Started: p, Tools: map[string]*ToolCall{}}
			r.steps[p.Step] = cur
		case *events.MessagesPendingData:
			if cur == nil {
				return nil, errOutside(id, e)
			}
			if p.AtStepEnd {
				cur.PendingEnd = p
			} else {
				cur.Pending = p
			}
		case *events.LLMCallStartedData:
			if cur == nil {
				return nil, errOutside(id, e)
			}
			cur.LLMStarted = p
		case *events.LLMCallFinishedData:
			if cur == nil {
				return nil, errOutside(id, e)
			}
			cur.LLMFinished = p
		case *events.ToolCallStartedData:
			if cur == nil {
				return nil, errOutside(id, e)
			}
			cur.Tools[p.CallID] = &ToolCall{Started: p}
		case *events.ToolCallFinishedData:
			if tc := cur.tool(p.CallID); tc != nil {
				tc.Finished = p
			}
		case *events.ChatFinishedData:
			if cur != nil {
				cur.Chat = p
			}
		case *events.StepFinishedData:
			if cur != nil {
				cur.Finished = p
			}
		}
	}
	return r, nil
}

func errOutside(id string, e Event) error {
	return fmt.Errorf("recording: run %s: %s (seq %d) outside a step", id, e.Type, e.Seq)
}

func (s *Step) tool(callID string) *ToolCall {
	if s == nil {
		return nil
	}
	return s.Tools[callID]
}

// Step returns what step n recorded, nil when it recorded nothing.
func (r *Run) Step(n int) *Step {
	if r == nil {
		return nil
	}
	return r.steps[n]
}

// Tool returns the recorded tool call callID of step n, nil when the
// recording has none.
func (r *Run) Tool(n int, callID string) *ToolCall { return r.Step(n).tool(callID) }

// Events returns the recorded events in seq order.
func (r *Run) Events() []Event { return slices.Clone(r.events) }

// LastSeq is the seq of the run's last recorded event (0 for none).
func (r *Run) LastSeq() int64 { return int64(len(r.events)) }

// CallDone reports whether step n's model call was answered (a result,
// an error or a before_llm_call finish decision was recorded): resuming,
// the call is not made again.
func (s *Step) CallDone() bool {
	return s != nil && (s.LLMFinished != nil || s.LLMStarted != nil && s.LLMStarted.Decision != nil)
}
