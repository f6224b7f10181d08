package admission

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
)

// PolicyName is the name of the [Policy] plugin.
const PolicyName = "admission-policy"

// Policy is the builtin admission policy: for a message arriving while its
// session is busy (a turn runs or follow-ups wait), answer admit_message
// with the action configured for the message's channel, else the default.
// An idle session always processes (no answer), so even "drop" only drops
// messages that would compete with a running turn.
type Policy struct {
	def       hooks.AdmitAction
	byChannel map[string]hooks.AdmitAction
}

var (
	_ hooks.MessageAdmitter = (*Policy)(nil)
	_ hooks.AdmissionScoper = (*Policy)(nil)
)

// ParsePolicy reads BUB_ADMISSION: an action (process, drop, follow_up or
// steer) for every channel, or a comma list of channel:action pairs with
// an optional bare default, e.g. "cli:steer,http:follow_up,process". An
// empty spec returns nil (no policy).
func ParsePolicy(spec string) (*Policy, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, nil
	}
	p := &Policy{byChannel: map[string]hooks.AdmitAction{}}
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		channel, action, scoped := strings.Cut(part, ":")
		if !scoped {
			action, channel = channel, ""
		}
		a, err := parseAction(strings.TrimSpace(action))
		if err != nil {
			return nil, fmt.Errorf("BUB_ADMISSION %q: %w", spec, err)
		}
		channel = strings.TrimSpace(channel)
		switch {
		case !scoped || channel == "*":
			p.def = a
		case channel == "":
			return nil, fmt.Errorf("BUB_ADMISSION %q: empty channel in %q", spec, part)
		default:
			p.byChannel[channel] = a
		}
	}
	return p, nil
}

func parseAction(s string) (hooks.AdmitAction, error) {
	switch a := hooks.AdmitAction(s); a {
	case process, drop, followUp, steer:
		return a, nil
	}
	return "", fmt.Errorf("unknown admission action %q: want process, drop, follow_up or steer", s)
}

// Name implements hooks.Plugin.
func (p *Policy) Name() string { return PolicyName }

// String renders the policy in BUB_ADMISSION syntax.
func (p *Policy) String() string {
	var parts []string
	for ch, a := range p.byChannel {
		parts = append(parts, ch+":"+string(a))
	}
	sort.Strings(parts)
	if p.def != "" {
		parts = append(parts, string(p.def))
	}
	return strings.Join(parts, ",")
}

// MayAdmit implements [hooks.AdmissionScoper]: the policy decides only
// for a channel whose action is not process.
func (p *Policy) MayAdmit(msg *envelope.Envelope) bool {
	a := p.action(msg)
	return a != "" && a != process
}

// action is the configured action for msg's channel ("" for none).
func (p *Policy) action(msg *envelope.Envelope) hooks.AdmitAction {
	if a, ok := p.byChannel[channelOf(msg)]; ok {
		return a
	}
	return p.def
}

func channelOf(msg *envelope.Envelope) string {
	if msg == nil {
		return ""
	}
	return msg.ChannelOrDefault()
}

// AdmitMessage implements admit_message (see [Policy]).
func (p *Policy) AdmitMessage(_ context.Context, in hooks.AdmitMessageInput) (hooks.AdmitDecision, bool, error) {
	if !in.Turn.IsRunning && in.Turn.PendingCount == 0 {
		return hooks.AdmitDecision{}, false, nil
	}
	a := p.action(in.Message)
	if a == "" {
		return hooks.AdmitDecision{}, false, nil
	}
	return hooks.AdmitDecision{Action: a, Reason: fmt.Sprintf("BUB_ADMISSION: %s session is busy", channelOf(in.Message))}, true, nil
}
