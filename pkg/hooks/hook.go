package hooks

// Hook names one hook. The value is the hook's name in Bub, which is also
// the last token of a remote interceptor's subject (bub.hook.<service>.<hook>).
type Hook string

// The hooks, in the order of docs/hooks.md's table.
const (
	HookResolveSession        Hook = "resolve_session"
	HookLoadState             Hook = "load_state"
	HookBuildPrompt           Hook = "build_prompt"
	HookRunModel              Hook = "run_model"
	HookRunModelStream        Hook = "run_model_stream"
	HookSaveState             Hook = "save_state"
	HookRenderOutbound        Hook = "render_outbound"
	HookDispatchOutbound      Hook = "dispatch_outbound"
	HookRegisterCLICommands   Hook = "register_cli_commands"
	HookOnboardConfig         Hook = "onboard_config"
	HookProvideRuntimeOptions Hook = "provide_runtime_options"
	HookOnError               Hook = "on_error"
	HookSystemPrompt          Hook = "system_prompt"
	HookProvideTapeStore      Hook = "provide_tape_store"
	HookProvideChannels       Hook = "provide_channels"
	HookBuildTapeContext      Hook = "build_tape_context"
	HookAdmitMessage          Hook = "admit_message"
	HookBeforeLLMCall         Hook = "before_llm_call"
	HookAfterLLMCall          Hook = "after_llm_call"
	HookBeforeToolCall        Hook = "before_tool_call"
	HookAfterToolCall         Hook = "after_tool_call"
	HookContinuePrompt        Hook = "continue_prompt"
	HookProvideSteeringInbox  Hook = "provide_steering_inbox"
)

// Kind says how a hook's implementations are called.
type Kind string

// The hook kinds (docs/hooks.md, "How hooks are called").
const (
	// KindFirstResult hooks stop at the first implementation that answers.
	KindFirstResult Kind = "firstresult"
	// KindBroadcast hooks run every implementation and combine the results.
	KindBroadcast Kind = "broadcast"
	// KindObserver hooks run every implementation; failures are isolated.
	KindObserver Kind = "observer"
	// KindChained hooks run in priority order, each implementation seeing
	// the previous one's modification, until a decision stops the chain;
	// failures are isolated.
	KindChained Kind = "chained"
)

// Phase says when a hook is called.
type Phase string

// The phases. See the package documentation for how Bub's sync-only
// hooks map to them.
const (
	// PhaseTurn hooks are called during turns (and agent steps).
	PhaseTurn Phase = "turn"
	// PhaseStartup hooks are called while a service or command starts.
	PhaseStartup Phase = "startup"
	// PhaseScope hooks are resolved once per runtime scope.
	PhaseScope Phase = "scope"
)

// Order is the order in which a hook's implementations run.
type Order string

// The orders.
const (
	// OrderPriority runs the most recently registered plugin first.
	OrderPriority Order = "priority"
	// OrderRegistration runs the first registered (builtin) plugin first.
	OrderRegistration Order = "registration"
)

// Spec describes one hook: how it is called, when, in which order, and
// whether implementation failures are isolated.
type Spec struct {
	Hook     Hook
	Kind     Kind
	Phase    Phase
	Order    Order
	Isolated bool
}

// Specs returns every hook in the order of Bub's hook reference, followed
// by continue_prompt and provide_steering_inbox; docs/hooks.md's table
// lists them in this order (a test checks it).
func Specs() []Spec {
	const (
		first     = KindFirstResult
		broadcast = KindBroadcast
		observer  = KindObserver
		chained   = KindChained
		turn      = PhaseTurn
		startup   = PhaseStartup
		scope     = PhaseScope
		prio      = OrderPriority
	)
	return []Spec{
		{HookResolveSession, first, turn, prio, false},
		{HookLoadState, broadcast, turn, prio, false},
		{HookBuildPrompt, first, turn, prio, false},
		{HookRunModel, first, turn, prio, false},
		{HookRunModelStream, first, turn, prio, false},
		{HookSaveState, broadcast, turn, prio, false},
		{HookRenderOutbound, broadcast, turn, prio, false},
		{HookDispatchOutbound, broadcast, turn, prio, false},
		{HookRegisterCLICommands, broadcast, startup, prio, false},
		{HookOnboardConfig, broadcast, startup, OrderRegistration, false},
		{HookProvideRuntimeOptions, broadcast, turn, prio, false},
		{HookOnError, observer, turn, prio, true},
		{HookSystemPrompt, broadcast, turn, prio, false},
		{HookProvideTapeStore, first, scope, prio, false},
		{HookProvideChannels, broadcast, startup, prio, false},
		{HookBuildTapeContext, first, startup, prio, false},
		{HookAdmitMessage, first, turn, prio, false},
		{HookBeforeLLMCall, chained, turn, prio, true},
		{HookAfterLLMCall, observer, turn, prio, true},
		{HookBeforeToolCall, chained, turn, prio, true},
		{HookAfterToolCall, observer, turn, prio, true},
		{HookContinuePrompt, first, turn, prio, false},
		{HookProvideSteeringInbox, first, scope, prio, false},
	}
}
