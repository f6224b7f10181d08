// Package admission schedules inbound envelopes of one session across many
// workers: Bub's admit_message with a cluster-wide turn registry.
//
// Before a worker runs a turn, the [Gate] (a worker.Processor wrapping the
// turn runtime) resolves the session (once: it passes the answer on in
// worker.Inbound, with the turn's steering inbox), asks admit_message with a
// hooks.TurnSnapshot computed from the [Registry] (JetStream KV bucket
// bub_turns: one key per running turn and per waiting follow-up, each with
// a per-key TTL its worker heartbeats, so a dead worker's entry expires),
// and acts on the decision:
//
//   - process (the default): run now, concurrently with any running turn.
//   - drop: publish dev.bub.turn.dropped.v1 and answer the sender with one
//     error envelope; nothing runs.
//   - follow_up: when the session has running turns or waiting follow-ups,
//     the inbound message stays unacknowledged (kept alive by in-progress
//     acks) and registers a wait key named by its inbound stream sequence;
//     it runs once no turn of the session runs and no follow-up with a
//     lower sequence waits. Follow-ups therefore run one at a time in
//     inbound stream order (arrival order). If its worker dies, the message
//     is redelivered and takes over its wait key (same sequence) while the
//     key lives, keeping its place.
//   - steer: with a running turn, the envelope is published to
//     bub.steer.<session> (stream BUB_STEER), marked queued in the
//     registry and acknowledged; the worker running a turn of the session
//     claims it at its next MessagesPending ([Steering], a claim key per
//     message in the registry) and deletes it (and its marker) only once
//     that turn finished, so a crash hands it to the redelivered turn.
//     Steering messages nobody claimed when the session's last turn ends,
//     or claimed by a turn that no longer runs (its run key gone: handed
//     back, and its redelivery ended without taking them), are
//     re-injected into the inbound stream as forced follow-ups (header
//     Bub-Admission: follow_up; Bub-Arrived keeps the inbound sequence the
//     message first arrived at, which is what ,quit compares). A claim is
//     created only where none exists (KV create), by a turn's drain or by
//     the sweep before it re-injects, so a message is taken once. A
//     message a finished turn took but could not remove stays claimed as
//     taken and is removed, not run, by the next sweep. Without a running
//     turn, steer behaves like follow_up.
//
// Each worker mirrors the registry's session keys from one KV watch, so a
// snapshot costs one direct get (the barrier that makes the mirror exact
// as of the call) and a drain of a session with no queued marker costs
// nothing. A steering message is acknowledged only once its queued marker
// and its decision marker (decided.<envelope> = steer, as long-lived as a
// done marker) are stored (a crash in between redelivers it, and the
// redelivery steers it again); a redelivery that finds the decision does
// nothing, so a message a turn already took never runs as a turn of its
// own. A drop stores its decision marker before its turn.dropped event
// and reply, so a redelivery (the reply could not be sent) is dropped
// again, with the same event and reply ids, even into an idle session.
//
// Pay for what you use: a message that no admit_message implementation
// may decide (hooks.AdmissionScoper: the builtin decides only for
// channels that decide admission, the CLI's; [Policy] only for channels
// whose action is not process) is processed without a snapshot, unless a
// queued marker of its session shows. Its turn still holds a run key (quit
// and other workers' follow-ups wait for it), and its end-of-turn sweep
// answers from the mirror once the mirror has applied the run key's
// removal; other turns' sweeps read the steering stream.
//
// Quit (Bub's quit(session), the ,quit command) is a core-NATS broadcast
// on bub.control.quit.<session> that every gate subscribes to: each gate
// cancels its running turns of the session (worker.ErrQuit; the calling
// turn excepted) and clears its waiting follow-ups of the session
// (turn.dropped with reason "quit"); [Gate.Quit] returns once the registry
// shows them gone. A stopped turn is recorded as a cancelled run, sends no
// reply and is acknowledged. Quit stops what came before it: the messages
// stored in the inbound stream before the call. A quit marker in the
// registry (quit.<next inbound sequence>, the caller as its value) drops
// one of them that was running nowhere during the quit (a turn or
// follow-up handed back by a stopping worker, a message not yet
// delivered, a steering message re-injected as a follow-up) when it is
// delivered; messages that arrive after the quit run as usual, and Quit
// does not wait for them. A turn the quit stops gives back the steering
// messages it took that arrived after the quit (the end-of-turn sweep
// runs them as follow-ups).
//
// Decisions are sticky across redeliveries: a redelivered envelope that
// finds its own run or wait key keeps that decision. A done marker written
// before the acknowledgement makes a redelivered envelope whose turn
// already finished a no-op. The marker also says where the turn's replies
// are stored (package replies), which is how ingress answers a retried
// POST /v1/messages with the original reply.
//
// [Policy] is the builtin admission policy (BUB_ADMISSION=steer or
// cli:steer,http:follow_up) registered as a plugin in the worker.
//
// Looking for the hook dispatch? See pkg/hooks. For the worker loop that
// calls the gate? See internal/worker.
package admission
