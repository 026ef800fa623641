// Package delegation is the domain of Delegation Studio: subagent specs and
// their validation, messages, the agent loop, the task tool, the virtual
// filesystem tools, the contexts isolated and fork children start from,
// receipts, the rules for what state crosses back, summarization, and the
// events a session is a log of.
//
// Each rule of spec/delegation.md lives in one function, in the file named
// for it: what a child sees in context.go, the receipt in receipt.go, what
// crosses back in state.go, the task tool in task.go.
//
// The package does no I/O but through its interfaces (Model, Sink, Counter)
// and is deterministic with a deterministic model.
package delegation
