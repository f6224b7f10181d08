package hooks

import (
	"cmp"
	"slices"
	"strings"
)

// Report is the hook discovery report `bub hooks` prints: every hook with
// at least one implementation, sorted by name.
type Report []HookReport

// HookReport lists the implementations of one hook in the order they run.
type HookReport struct {
	Spec
	Impls []ImplReport
}

// ImplReport is one implementation of a hook.
type ImplReport struct {
	Plugin      string
	Description Description
}

// Report returns the discovery report. Implementations are listed in the
// order they actually run (priority order, except onboard_config), so the
// first listed implementation of a firstresult hook is the first one
// asked; the winner is the first that answers, which only a call can tell.
func (r *Registry[S, C]) Report() Report {
	t := r.tab.Load()
	desc := make(map[string]Description, len(t.plugins))
	for _, p := range t.plugins {
		if d, ok := As[Describer](p); ok {
			desc[p.Name()] = d.Describe()
		}
	}
	var rep Report
	for _, spec := range Specs() {
		names := slices.Clone(t.names[spec.Hook])
		if len(names) == 0 {
			continue
		}
		if spec.Order == OrderRegistration {
			slices.Reverse(names)
		}
		hr := HookReport{Spec: spec}
		for _, n := range names {
			hr.Impls = append(hr.Impls, ImplReport{Plugin: n, Description: desc[n]})
		}
		rep = append(rep, hr)
	}
	slices.SortFunc(rep, func(a, b HookReport) int { return cmp.Compare(a.Hook, b.Hook) })
	return rep
}

// String renders the report one hook per line:
//
//	before_tool_call [chained, in run order; a decision stops the chain; failures isolated]: policy (remote: policy-svc), builtin
func (rep Report) String() string {
	if len(rep) == 0 {
		return "(no hook implementations)\n"
	}
	var b strings.Builder
	for _, h := range rep {
		b.WriteString(string(h.Hook))
		b.WriteString(" [")
		b.WriteString(h.summary())
		b.WriteString("]: ")
		for i, im := range h.Impls {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(im.Plugin)
			if d := im.Description; d.Remote {
				b.WriteString(" (remote")
				for _, s := range []string{d.Service, d.Detail} {
					if s != "" {
						b.WriteString(": ")
						b.WriteString(s)
					}
				}
				b.WriteString(")")
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// summary says how the listed implementations are called.
func (h HookReport) summary() string {
	order := "in run order"
	if h.Order == OrderRegistration {
		order = "in registration order"
	}
	var s string
	switch h.Kind {
	case KindFirstResult:
		s = "firstresult, " + order + "; the first that answers wins"
	case KindBroadcast:
		s = "broadcast, " + order + "; all run"
	case KindObserver:
		s = "observer, " + order + "; all run"
	case KindChained:
		s = "chained, " + order + "; a decision stops the chain"
	}
	if h.Isolated {
		s += "; failures isolated"
	}
	switch h.Phase {
	case PhaseStartup:
		s += "; startup only"
	case PhaseScope:
		s += "; once per runtime scope"
	}
	return s
}
