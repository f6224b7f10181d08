package channels

import (
	"fmt"
	"slices"
	"strings"

	"github.com/bubbus/bub/pkg/hooks"
)

// FromHooks returns the channels provide_channels handed out as
// [Channel]s, in order. A provided value that is not a Channel (it lacks
// Start or Stop) is an error naming it.
func FromHooks(list []hooks.Channel) ([]Channel, error) {
	out := make([]Channel, 0, len(list))
	for _, h := range list {
		ch, ok := h.(Channel)
		if !ok {
			return nil, fmt.Errorf("channel %q has no Start and Stop: it is not a channels.Channel", h.Name())
		}
		out = append(out, ch)
	}
	return out, nil
}

// Select returns the channels enabled by enabled, the comma list of
// BUB_ENABLED_CHANNELS (Bub's enabled_channels()). Entries are trimmed and
// "!name" excludes a channel. When "all" is listed, every channel that is
// not excluded, is enabled (see [Toggler]) and is not an [Interface] is
// selected. Otherwise the named channels that are not excluded and are
// enabled are selected in provider order, and when at least one of them is
// not a [Lifecycle] channel, every other enabled, non-excluded Lifecycle
// channel is appended. An empty list selects nothing.
func Select(chs []Channel, enabled string) []Channel {
	var named []string
	excluded := map[string]bool{}
	for entry := range strings.SplitSeq(enabled, ",") {
		entry = strings.TrimSpace(entry)
		if name, ok := strings.CutPrefix(entry, "!"); ok {
			excluded[name] = true
		} else if entry != "" {
			named = append(named, entry)
		}
	}
	usable := func(ch Channel) bool { return !excluded[ch.Name()] && IsEnabled(ch) }
	var out []Channel
	if slices.Contains(named, "all") {
		for _, ch := range chs {
			if usable(ch) && KindOf(ch) != Interface {
				out = append(out, ch)
			}
		}
		return out
	}
	anyNonLifecycle := false
	chosen := map[string]bool{}
	for _, ch := range chs {
		if usable(ch) && slices.Contains(named, ch.Name()) {
			out = append(out, ch)
			chosen[ch.Name()] = true
			anyNonLifecycle = anyNonLifecycle || KindOf(ch) != Lifecycle
		}
	}
	if !anyNonLifecycle {
		return out
	}
	for _, ch := range chs {
		if usable(ch) && KindOf(ch) == Lifecycle && !chosen[ch.Name()] {
			out = append(out, ch)
		}
	}
	return out
}

// IsEnabled reports whether ch is enabled: its [Toggler] says so, or it
// has none.
func IsEnabled(ch Channel) bool {
	t, ok := ch.(Toggler)
	return !ok || t.Enabled()
}

// KindOf returns the [Kind] ch declares with [Kinder], else [Regular].
func KindOf(ch Channel) Kind {
	if k, ok := ch.(Kinder); ok {
		return k.ChannelKind()
	}
	return Regular
}

// NeedsDebounce reports whether ch asks for debounced input with
// [Debouncer].
func NeedsDebounce(ch Channel) bool {
	d, ok := ch.(Debouncer)
	return ok && d.NeedsDebounce()
}
