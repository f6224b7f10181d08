package hooks_test

import "github.com/bubbus/bub/pkg/hooks"

// Compile-time guards: the test plugin implements every hook interface and
// the selector capability.
var (
	_ hooks.SessionResolver              = (*fake)(nil)
	_ hooks.StateLoader                  = (*fake)(nil)
	_ hooks.PromptBuilder                = (*fake)(nil)
	_ hooks.ModelRunner                  = (*fake)(nil)
	_ hooks.ModelStreamer                = (*fake)(nil)
	_ hooks.StateSaver                   = (*fake)(nil)
	_ hooks.OutboundRenderer             = (*fake)(nil)
	_ hooks.OutboundDispatcher           = (*fake)(nil)
	_ hooks.CLICommandRegistrar          = (*fake)(nil)
	_ hooks.ConfigOnboarder              = (*fake)(nil)
	_ hooks.RuntimeOptionsProvider       = (*fake)(nil)
	_ hooks.ErrorObserver                = (*fake)(nil)
	_ hooks.SystemPrompter               = (*fake)(nil)
	_ hooks.TapeStoreProvider[*memStore] = (*fake)(nil)
	_ hooks.ChannelProvider              = (*fake)(nil)
	_ hooks.TapeContextBuilder[tapeCtx]  = (*fake)(nil)
	_ hooks.MessageAdmitter              = (*fake)(nil)
	_ hooks.LLMCallInterceptor           = (*fake)(nil)
	_ hooks.LLMCallObserver              = (*fake)(nil)
	_ hooks.ToolCallInterceptor          = (*fake)(nil)
	_ hooks.ToolCallObserver             = (*fake)(nil)
	_ hooks.PromptContinuer              = (*fake)(nil)
	_ hooks.SteeringInboxProvider        = (*fake)(nil)
	_ hooks.HookSelector                 = (*fake)(nil)
	_ hooks.Closer                       = (*memStore)(nil)
)
