package delegation

// Mode is how a subagent's context is built (delegation.md §4).
type Mode string

const (
	ModeIsolated Mode = "isolated" // sees only the task description
	ModeFork     Mode = "fork"     // continues the parent's effective history
)
