package llm

// The kinds of a [Delta].
const (
	DeltaText      = "text"
	DeltaReasoning = "reasoning"
)
