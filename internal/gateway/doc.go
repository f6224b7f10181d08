// Package gateway is the gateway service: it
// runs the channels plugins provide (provide_channels), publishes what
// they receive to the inbound stream, and delivers the outbound envelopes
// addressed to them. `bub gateway` runs one; `bub up` contains one when a
// channel is enabled.
//
// Start with [Run] (or [Start] and [Gateway.Stop]) and [Options].
//
// # Inbound
//
// The channels' handler is a [channels.Manager]: messages of channels that
// need debounce are batched per raw session id (channels.Buffer), the
// others go at once. Each message then goes through
// ingress.Publisher.Publish — the same path as an HTTP request — to
// bub.inbound.<channel> with Nats-Msg-Id = its id; a message without an
// id gets a UUIDv7 first. An invalid envelope or a failed publish is
// returned to the channel, which decides what to do (a debounced batch's
// failure is logged, since its channel is no longer waiting).
//
// Admission is not the gateway's: workers decide it (admit_message).
//
// # Outbound
//
// For every selected channel that is a [channels.Sender], the gateway
// pulls from the durable consumer gateway-<channel> on BUB_OUTBOUND
// filtered to bub.outbound.<channel>.* (natsx.Topology.GatewayConsumer).
// Every gateway instance running the channel shares it, so each message
// goes to one instance at a time. BUB_OUTBOUND has limits retention (it
// keeps replies for OutboundMaxAge whether or not anyone consumed them),
// so a consumer created for the first time delivers only new messages
// (DeliverNew) rather than replaying a day of history; once created, it
// resumes where it stopped across restarts. Ingress's ?wait reads
// outbound envelopes over core NATS and is unaffected.
//
// A message is sent as follows: decode it (an undecodable message, a
// wrong event type or invalid data is dead-lettered with its reason, see
// internal/dlq); claim its outbound id in the delivered bucket with a
// compare-and-set create (key <channel>.<id>); call Send while refreshing
// the claim and sending in-progress acks every third of the ack wait;
// mark the key "sent"; acknowledge. A message whose id is already marked
// sent is acknowledged without sending (a second copy published under
// another Nats-Msg-Id or after the dedupe window). A failed Send marks
// the claim released ("partial", with the parts a channel delivered and
// how many sends failed, so any gateway takes it at once and counts on)
// and is sent again with exponential backoff (RetryDelay, doubled per
// try, at most a minute; no sooner than a rate limit's retry after, when
// the error says one: channels.RetryAfter, Telegram's 429) until its
// tries reach GatewayMaxDeliver, after which it is dead-lettered as
// send_failed; a Send error wrapping [channels.ErrUndeliverable] is
// dead-lettered at once. A live claim of another gateway makes the copy
// wait as a failed send does, until the claim goes stale (a copy that
// finds a live claim GatewayMaxDeliver times is a duplicate and is
// dead-lettered). A gateway that dies holding its last delivery is
// dead-lettered as max_delivered by the advisory watcher
// (dlq.WatchMaxDeliveries). Marks live as long as outbound messages (the
// bucket's TTL is OutboundMaxAge).
//
// A session's replies are sent in order. The pull loop hashes each
// message's subject (bub.outbound.<channel>.<session>) to one of
// Concurrency lanes, each sending one message at a time. A message that
// waits for its retry waits in its lane, with the later replies of its
// session queued behind it, while the lane's other sessions go on; a
// goroutine of the lane keeps them alive with in-progress acks, however
// long the lane's current send takes. A gateway that stops hands them
// back to the stream, due at the retry. Two gateway instances sharing a
// channel may send one session's replies in parallel: order holds within
// an instance.
//
// # Delivery guarantee
//
// Each outbound id is sent at most once per channel, across restarts and
// any number of gateway instances, except at one point: when a gateway
// dies (or loses NATS) after the channel accepted a send and before the
// "sent" mark is stored, its claim stops being refreshed, and once it is
// older than the ack wait the redelivered message is claimed again and
// sent again. There, and only there, delivery is at-least-once: one
// message can be sent twice. Nothing is lost: a message is acknowledged
// only after its send succeeded (or it is dead-lettered). A reply a
// channel sends in parts (Telegram's longer than 4,096 characters) keeps
// the parts delivered in its claim (channels.Progress: "claimed:2", and
// "partial:2" after a failed part), so a retry sends only the rest; the
// same at-least-once point holds per part.
//
// Looking for the channel contract? See pkg/channels. For the HTTP API,
// see internal/ingress.
package gateway
