package tools_test

import (
	"errors"
	"testing"

	"github.com/bubbus/bub/pkg/tools"
)

func TestEffectClass(t *testing.T) {
	for _, tc := range []struct {
		declared tools.Effect
		want     tools.Effect
	}{
		{"", tools.EffectIrreversible},
		{tools.EffectReadOnly, tools.EffectReadOnly},
		{tools.EffectIdempotent, tools.EffectIdempotent},
		{tools.EffectIrreversible, tools.EffectIrreversible},
	} {
		tl := tool("x", nil)
		tl.Effect = tc.declared
		if got := tl.EffectClass(); got != tc.want {
			t.Errorf("EffectClass of %q = %q, want %q", tc.declared, got, tc.want)
		}
	}
}

func TestParseEffect(t *testing.T) {
	for in, want := range map[string]tools.Effect{"": tools.EffectIrreversible, "read_only": tools.EffectReadOnly, "idempotent": tools.EffectIdempotent, "irreversible": tools.EffectIrreversible} {
		if got, err := tools.ParseEffect(in); err != nil || got != want {
			t.Errorf("ParseEffect(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := tools.ParseEffect("readonly"); err == nil {
		t.Error(`ParseEffect("readonly") succeeded`)
	}
}

func TestRegisterRejectsUnknownEffect(t *testing.T) {
	var reg tools.Registry
	tl := tool("x", nil)
	tl.Effect = "safe"
	if err := reg.Register(tl); !errors.Is(err, tools.ErrInvalidTool) {
		t.Errorf("Register with effect %q = %v, want ErrInvalidTool", tl.Effect, err)
	}
	tl.Effect = tools.EffectReadOnly
	if err := reg.Register(tl); err != nil {
		t.Errorf("Register read_only: %v", err)
	}
}
