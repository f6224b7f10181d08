// Package taperec is Bub's TapeRecorder as a pure function: it maps
// the payload of a lifecycle event to the tape entries Bub records for it
// (RunStarted → loop.start, StepStarted → loop.step.start, StepFinished →
// loop.step, ChatFinished → record_chat's entries, CommandFinished →
// command, RunFinished → loop.finish, custom tape events, hook decisions).
//
// Both the worker (which reads its own run through a tape fork) and the
// recorder service (the only tape writer) use [Map], so a run leaves the
// same entries in both places: the recorder on the payload it decodes
// from the published CloudEvent, the worker through [MapEvent] on the
// in-process event's typed payload (no JSON round trip; the store
// normalizes both to the same entries). Start with [Map]. Looking for the store the
// entries go to? See package tape. For the recorder service see
// internal/recorder.
package taperec
