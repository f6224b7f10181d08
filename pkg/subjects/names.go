package subjects

import (
	"fmt"
	"regexp"
	"strings"
)

// DefaultPrefix is the root of every subject when none is configured.
const DefaultPrefix = "bub"

var prefixRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

// Names builds every NATS name of one deployment from its root prefix.
// Several deployments can share a cluster under different prefixes.
type Names struct {
	prefix string // e.g. "bub"
	upper  string // e.g. "BUB", for stream names
	under  string // e.g. "bub", for bucket names ("-" becomes "_")
}

// New returns the names for prefix ("" means [DefaultPrefix]). A prefix is
// 1–32 characters of [a-z0-9-] starting with a letter.
func New(prefix string) (Names, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if !prefixRE.MatchString(prefix) {
		return Names{}, fmt.Errorf("subjects: invalid prefix %q: want 1-32 of [a-z0-9-], starting with a letter", prefix)
	}
	under := strings.ReplaceAll(prefix, "-", "_")
	return Names{prefix: prefix, upper: strings.ToUpper(under), under: under}, nil
}

// Default returns the names for [DefaultPrefix].
func Default() Names {
	n, _ := New(DefaultPrefix)
	return n
}

// Prefix returns the root prefix.
func (n Names) Prefix() string { return n.prefix }

func (n Names) subj(parts ...string) string {
	return n.prefix + "." + strings.Join(parts, ".")
}

// Inbound is the subject of inbound envelopes of a channel:
// bub.inbound.<channel>.
func (n Names) Inbound(channel string) string { return n.subj("inbound", Token(channel)) }

// InboundAll matches every inbound envelope: bub.inbound.>.
func (n Names) InboundAll() string { return n.subj("inbound", ">") }

// Event is the subject of one lifecycle event of a session:
// bub.events.<session>.<event>, where event is a dotted name such as
// "tool_call.started".
func (n Names) Event(session, event string) string {
	return n.subj("events", Token(session), event)
}

// EventsOf matches every lifecycle event of one session.
func (n Names) EventsOf(session string) string { return n.subj("events", Token(session), ">") }

// EventsAll matches every lifecycle event: bub.events.>.
func (n Names) EventsAll() string { return n.subj("events", ">") }

// EventsOfType matches one event type of every session, e.g.
// bub.events.*.tool_call.started.
func (n Names) EventsOfType(event string) string { return n.subj("events", "*", event) }

// Tape is the subject holding a session's tape: bub.tape.<session>.
func (n Names) Tape(session string) string { return n.subj("tape", Token(session)) }

// TapesAll matches every tape subject.
func (n Names) TapesAll() string { return n.subj("tape", "*") }

// TapeArchive is the subject holding archived entries of a session's tape.
func (n Names) TapeArchive(session string) string {
	return n.subj("tape-archive", Token(session))
}

// TapeArchivesAll matches every tape archive subject.
func (n Names) TapeArchivesAll() string { return n.subj("tape-archive", ">") }

// TapeIndex is the subject of a session's tape index in the tapes
// stream: its last message is the tape's committed index, written in the
// same atomic batch as the entries it commits: bub.tape-index.<session>.
func (n Names) TapeIndex(session string) string { return n.subj("tape-index", Token(session)) }

// TapeIndexesAll matches every tape index subject.
func (n Names) TapeIndexesAll() string { return n.subj("tape-index", "*") }

// Outbound is the subject of outbound envelopes of a channel and session:
// bub.outbound.<channel>.<session>.
func (n Names) Outbound(channel, session string) string {
	return n.subj("outbound", Token(channel), Token(session))
}

// OutboundAll matches every outbound envelope.
func (n Names) OutboundAll() string { return n.subj("outbound", ">") }

// OutboundOfChannel matches every outbound envelope of one channel.
func (n Names) OutboundOfChannel(channel string) string {
	return n.subj("outbound", Token(channel), "*")
}

// TokenStream is the core-NATS subject of token deltas of one run:
// bub.stream.<session>.<run>.
func (n Names) TokenStream(session, run string) string {
	return n.subj("stream", Token(session), Token(run))
}

// TokenStreamOf matches every token delta of a session.
func (n Names) TokenStreamOf(session string) string {
	return n.subj("stream", Token(session), "*")
}

// Steer is the subject of steering messages for a session's running turn.
func (n Names) Steer(session string) string { return n.subj("steer", Token(session)) }

// SteerAll matches every steering subject.
func (n Names) SteerAll() string { return n.subj("steer", "*") }

// ControlQuit is the core-NATS broadcast subject by which a worker running
// ,quit in a session asks every worker to stop the session's other turns:
// bub.control.quit.<session>.
func (n Names) ControlQuit(session string) string { return n.subj("control", "quit", Token(session)) }

// ControlQuitAll matches the quit broadcast of every session (every worker
// subscribes to it).
func (n Names) ControlQuitAll() string { return n.subj("control", "quit", "*") }

// Hook is the request/reply subject of one hook of an interceptor service:
// bub.hook.<service>.<hook>.
func (n Names) Hook(service, hook string) string { return n.subj("hook", service, hook) }

// HookService is the subject prefix of an interceptor service's endpoints
// (used as the NATS micro group).
func (n Names) HookService(service string) string { return n.subj("hook", service) }

// HookAll matches every interceptor endpoint.
func (n Names) HookAll() string { return n.subj("hook", ">") }

// WorkerShells is the request/reply subject on which the worker instance
// serves bash.output and bash.kill of the background shells it owns:
// bub.worker.<instance>.shell.
func (n Names) WorkerShells(instance string) string {
	return n.subj("worker", Token(instance), "shell")
}

// WorkerShellsAll matches the shell subject of every worker instance.
func (n Names) WorkerShellsAll() string { return n.subj("worker", "*", "shell") }

// WorkerHooks is the request/reply subject on which a worker answers with
// its hook report (every hook's implementations in run order, what
// `bub hooks` prints): bub.worker.hooks. Workers subscribe in the queue
// group [Names.HookReporters], so one of them answers each request.
func (n Names) WorkerHooks() string { return n.subj("worker", "hooks") }

// HookReporters is the queue group of the workers answering
// [Names.WorkerHooks].
func (n Names) HookReporters() string { return n.prefix + "-hook-reporters" }

// Service is the NATS micro service name of one of the deployment's
// services (worker, ingress, recorder, gateway): <prefix>-<service>, e.g.
// bub-worker, so two deployments on one server are told apart by
// `nats micro ls` and by discovery.
func (n Names) Service(service string) string { return n.prefix + "-" + service }

// ServiceStatus is the request/reply subject of the status endpoint of
// one instance of a service: bub.service.<service>.<instance>.status.
func (n Names) ServiceStatus(service, instance string) string {
	return n.subj("service", Token(service), Token(instance), "status")
}

// ApprovalAnswer is the subject a person's answer to an approval is sent
// to as a NATS request (the ingress answers it): bub.approval.answer.
func (n Names) ApprovalAnswer() string { return n.subj("approval", "answer") }

// DLQ is the dead-letter subject for reason: bub.dlq.<reason>.
func (n Names) DLQ(reason string) string { return n.subj("dlq", Token(reason)) }

// DLQAll matches every dead letter.
func (n Names) DLQAll() string { return n.subj("dlq", ">") }

// Stream names.

// InboundStream holds inbound envelopes (work-queue retention).
func (n Names) InboundStream() string { return n.upper + "_INBOUND" }

// EventsStream holds lifecycle events (limits retention).
func (n Names) EventsStream() string { return n.upper + "_EVENTS" }

// TapesStream holds tapes; only the recorder writes it.
func (n Names) TapesStream() string { return n.upper + "_TAPES" }

// OutboundStream holds outbound envelopes.
func (n Names) OutboundStream() string { return n.upper + "_OUTBOUND" }

// SteerStream holds steering messages.
func (n Names) SteerStream() string { return n.upper + "_STEER" }

// DLQStream holds dead letters.
func (n Names) DLQStream() string { return n.upper + "_DLQ" }

// Consumer names.

// WorkerConsumer is the shared durable pull consumer of workers on the
// inbound stream.
func (n Names) WorkerConsumer() string { return "workers" }

// RecorderConsumer is the recorder's durable consumer on the events stream.
func (n Names) RecorderConsumer() string { return "recorder" }

// GatewayConsumer is the durable pull consumer on the outbound stream that
// every gateway instance running channel shares: gateway-<channel>.
func (n Names) GatewayConsumer(channel string) string { return "gateway-" + Token(channel) }

// KV bucket names.

// StateBucket holds per-session state (model switches) and background shell owners.
func (n Names) StateBucket() string { return n.under + "_state" }

// TurnsBucket is the cluster-wide turn registry.
func (n Names) TurnsBucket() string { return n.under + "_turns" }

// DeliveredBucket holds the gateways' delivery marks of outbound
// envelopes (claimed, then sent), so each outbound id is sent once.
func (n Names) DeliveredBucket() string { return n.under + "_delivered" }

// DeliveredKey is the delivered-bucket key of outbound envelope id on
// channel: <channel>.<id>, both as tokens.
func (n Names) DeliveredKey(channel, id string) string { return Token(channel) + "." + Token(id) }

// ApprovalsBucket holds the approvals of parked tool calls, one key per
// approval id (internal/approvals).
func (n Names) ApprovalsBucket() string { return n.under + "_approvals" }

// TapeIndexBucket is the KV bucket in which earlier versions kept the
// tape indexes (now on [Names.TapeIndex]); a store that provisions the
// tapes stream copies what it holds once (package tape).
func (n Names) TapeIndexBucket() string { return n.under + "_tape_index" }

// Header names used on Bub messages (nats.Header is case-sensitive).
const (
	HeaderMsgID           = "Nats-Msg-Id"
	HeaderExpectedLastSeq = "Nats-Expected-Last-Subject-Sequence"
	HeaderDLQReason       = "Bub-Dlq-Reason"
	HeaderDLQError        = "Bub-Dlq-Error"
	HeaderDLQSubject      = "Bub-Dlq-Subject"
	HeaderDeadline        = "Bub-Deadline"
	HeaderHookError       = "Bub-Hook-Error"
	HeaderTraceparent     = "traceparent"
	HeaderTracestate      = "tracestate"
	// HeaderStatus and HeaderDescription carry the status of a JetStream
	// direct-get reply ("404" when there is no such message).
	HeaderStatus      = "Status"
	HeaderDescription = "Description"
)

// KV keys.

// SwitchesKey is the state-bucket key of a session's latest model and
// reasoning-effort switches (maintained by the recorder).
func (n Names) SwitchesKey(session string) string { return Token(session) + ".switches" }

// ShellOwnerKey is the state-bucket key naming the worker instance that
// owns a background shell (written by that worker while the shell exists).
func (n Names) ShellOwnerKey(shellID string) string { return "shell." + Token(shellID) }

// Turn registry keys (bucket [Names.TurnsBucket]). Every key of a session
// is three tokens and starts with the session's token, so
// [Names.TurnKeysOfSession] matches all of them and
// [Names.TurnSessionKeys] those of every session; done markers are two.

// TurnSessionKeys matches the keys of every session in the turn registry
// (run, wait, steering-claim, queued-steering and quit keys), not the done
// and decision markers.
func (n Names) TurnSessionKeys() string { return "*.*.*" }

// TurnKeysOfSession matches the run, wait, steering and quit keys of one
// session (a KV-key pattern; see TurnSessionKeys).
func (n Names) TurnKeysOfSession(session string) string { return Token(session) + ".*.*" }

// TurnRunKey is the turn-registry key of a running turn: the session's
// token, "run" and the inbound envelope's token. It lives while its
// worker heartbeats it (per-key TTL).
func (n Names) TurnRunKey(session, envelope string) string {
	return Token(session) + ".run." + Token(envelope)
}

// TurnRunKeys matches the running turns of a session.
func (n Names) TurnRunKeys(session string) string { return Token(session) + ".run.*" }

// TurnWaitKey is the turn-registry key of a follow-up waiting for the
// session's running turns, named by its inbound stream sequence
// (zero-padded, so keys sort in arrival order).
func (n Names) TurnWaitKey(session string, seq uint64) string {
	return fmt.Sprintf("%s.wait.%020d", Token(session), seq)
}

// SteerClaimKey is the turn-registry key by which a running turn claims
// the steering message at steer-stream sequence seq.
func (n Names) SteerClaimKey(session string, seq uint64) string {
	return fmt.Sprintf("%s.steer.%020d", Token(session), seq)
}

// SteerQueuedKey is the turn-registry key marking the steering message
// at steer-stream sequence seq as queued (published, not yet removed), so
// workers see waiting steering messages without reading the stream.
func (n Names) SteerQueuedKey(session string, seq uint64) string {
	return fmt.Sprintf("%s.queued.%020d", Token(session), seq)
}

// QuitKey is the turn-registry key recording that ,quit stopped the
// session's messages stored in the inbound stream before sequence before
// (its value is the envelope id of the turn that quit): one of them
// delivered (again) afterwards never runs. It lives as long as a done
// marker.
func (n Names) QuitKey(session string, before uint64) string {
	return fmt.Sprintf("%s.quit.%020d", Token(session), before)
}

// DoneKey is the turn-registry key marking an inbound envelope whose turn
// finished and was acknowledged, so a redelivery never runs it again; its
// value says where the turn's replies are stored.
func (n Names) DoneKey(envelope string) string { return "done." + Token(envelope) }

// DecidedKey is the turn-registry key recording the admission decision of
// an inbound envelope that does not run as a turn of its own (steer,
// drop), stored before the decision's effects, so that a redelivery of
// its message (its acknowledgement lost) keeps the decision.
func (n Names) DecidedKey(envelope string) string { return "decided." + Token(envelope) }

// KVKeySubject is the subject JetStream stores a KV key of bucket under
// ($KV.<bucket>.<key>); publishing to it with a message TTL refreshes the
// key's time to live.
func (n Names) KVKeySubject(bucket, key string) string { return "$KV." + bucket + "." + key }

// KVPut is the subject to publish a KV key of bucket to in JetStream
// domain (empty = the local one): [Names.KVKeySubject] behind the
// domain's API prefix, which the domain's servers map back to it.
func (n Names) KVPut(domain, bucket, key string) string {
	if domain != "" {
		return "$JS." + domain + ".API." + n.KVKeySubject(bucket, key)
	}
	return n.KVKeySubject(bucket, key)
}

// DirectGet is the JetStream direct-get request subject of stream in
// JetStream domain (empty = the local one; its request body names the
// message: {"last_by_subj": …}); the stream must allow direct gets (every
// KV bucket does).
func (n Names) DirectGet(domain, stream string) string {
	return jsAPI(domain, "DIRECT.GET."+stream)
}

// MsgGet is the JetStream message-get request subject of stream in
// JetStream domain (empty = the local one; its request body names the
// message: {"seq": …, "next_by_subj": …} or {"last_by_subj": …}). Unlike a
// direct get, only the stream's leader answers it.
func (n Names) MsgGet(domain, stream string) string {
	return jsAPI(domain, "STREAM.MSG.GET."+stream)
}

// jsAPI is the JetStream API subject rest ("DIRECT.GET.<stream>", …) in
// domain: $JS.API.<rest>, or $JS.<domain>.API.<rest>.
func jsAPI(domain, rest string) string {
	if domain != "" {
		return "$JS." + domain + ".API." + rest
	}
	return "$JS.API." + rest
}

// KVStream is the stream backing a KV bucket (KV_<bucket>).
func (n Names) KVStream(bucket string) string { return "KV_" + bucket }

// MaxDeliveriesAdvisory is the JetStream advisory subject the server
// publishes to when a message of consumer on stream exhausted its
// deliveries.
func (n Names) MaxDeliveriesAdvisory(stream, consumer string) string {
	return "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + stream + "." + consumer
}

// More header names.
const (
	// HeaderAdmission carries a forced admission decision on an inbound
	// message: "follow_up" on a late steering message re-injected as a
	// follow-up.
	HeaderAdmission = "Bub-Admission"
	// HeaderArrived carries, on a steering message and on the follow-up
	// it is re-injected as, the inbound stream sequence at which the
	// message first arrived (what ,quit compares: see
	// worker.Inbound.Arrived).
	HeaderArrived = "Bub-Arrived"
	// HeaderDLQStream and HeaderDLQSeq say where a dead letter was stored
	// before (its original stream and sequence); HeaderDLQDeliveries how
	// often it was delivered.
	HeaderDLQStream     = "Bub-Dlq-Stream"
	HeaderDLQSeq        = "Bub-Dlq-Seq"
	HeaderDLQDeliveries = "Bub-Dlq-Deliveries"
)

// DLQWatchers is the queue group of the workers' max-deliveries advisory
// watchers (one of them dead-letters each exhausted message).
func (n Names) DLQWatchers() string { return n.prefix + "-dlq-watchers" }
