package session

import (
	"encoding/json"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

// Node is an agent in the delegation tree, with its costs.
type Node struct {
	Agent trace.Agent
	// Calls is the number of model calls the agent made.
	Calls int
	// OwnTokens is the input tokens of the agent's own model calls;
	// SubtreeTokens adds its descendants', each counted once.
	OwnTokens, SubtreeTokens int
	// EntryTokens is the input of its first model call: what starting it
	// cost; InheritedTokens is the part of that inherited from its parent.
	EntryTokens, InheritedTokens int
	// Task is the description it was given; Receipt what came back.
	Task           string
	Receipt        string
	ReceiptIsError bool
	Children       []*Node
	// Refused are the task calls of this agent that started no child.
	Refused []Refusal
}

// Refusal is a task call that started no child.
type Refusal struct {
	ToolCallID   string
	Reason       string
	SubagentType string
	Message      string
}

// Tree builds the delegation tree of a trace; it returns the main agent.
func Tree(t *trace.Trace) *Node {
	nodes := map[string]*Node{}
	var root *Node
	for _, a := range t.Agents {
		n := &Node{Agent: a}
		nodes[a.ID] = n
		if a.ParentID == nil {
			root = n
		} else if p := nodes[*a.ParentID]; p != nil {
			p.Children = append(p.Children, n)
		}
	}
	for _, c := range t.ModelCalls {
		n := nodes[c.AgentID]
		if n == nil {
			continue
		}
		if n.Calls == 0 {
			n.EntryTokens, n.InheritedTokens = c.InputTokens, c.InheritedTokens
		}
		n.Calls++
		n.OwnTokens += c.InputTokens
	}
	receipts := map[string]trace.Message{}
	for _, m := range t.Messages {
		if m.Kind == string(delegation.KindReceipt) && m.ToolCallID != nil {
			receipts[*m.ToolCallID] = m
		}
	}
	for _, ev := range t.Events {
		switch ev.Type {
		case delegation.EventDelegationStarted:
			var d delegation.DelegationStarted
			if json.Unmarshal(ev.Data, &d) == nil && nodes[d.ChildID] != nil {
				nodes[d.ChildID].Task = d.Description
				if r, ok := receipts[d.ToolCallID]; ok {
					nodes[d.ChildID].Receipt, nodes[d.ChildID].ReceiptIsError = r.Content, r.IsError
				}
			}
		case delegation.EventDelegationRefused:
			var d delegation.DelegationRefused
			if json.Unmarshal(ev.Data, &d) == nil && nodes[ev.AgentID] != nil {
				nodes[ev.AgentID].Refused = append(nodes[ev.AgentID].Refused,
					Refusal{ToolCallID: d.ToolCallID, Reason: d.Reason, SubagentType: d.SubagentType, Message: d.Message})
			}
		}
	}
	if root != nil {
		subtree(root)
	}
	return root
}

func subtree(n *Node) int {
	n.SubtreeTokens = n.OwnTokens
	for _, c := range n.Children {
		n.SubtreeTokens += subtree(c)
	}
	return n.SubtreeTokens
}

// CallContext returns what a model call received after its system prompt:
// the messages its context ranges name, in order, resolved from the trace.
func CallContext(t *trace.Trace, call trace.ModelCall) []trace.Message {
	return ContextOf(Lists(t), call)
}

// ContextOf resolves a call's context against lists made once by Lists, for
// a view that resolves many calls.
func ContextOf(lists map[string][]trace.Message, call trace.ModelCall) []trace.Message {
	var out []trace.Message
	for _, r := range call.Context {
		list := lists[r.AgentID]
		if r.From < 0 || r.To > len(list) || r.From > r.To {
			continue // a trace from Parse never has one; a view must not panic on it
		}
		out = append(out, list[r.From:r.To]...)
	}
	return out
}

// Covers reports whether a call's context holds message idx of agent's list.
func Covers(call trace.ModelCall, agentID string, idx int) bool {
	for _, r := range call.Context {
		if r.AgentID == agentID && r.From <= idx && idx < r.To {
			return true
		}
	}
	return false
}

// Lists returns each agent's message list: its messages in the order they
// were added.
func Lists(t *trace.Trace) map[string][]trace.Message {
	lists := map[string][]trace.Message{}
	for _, m := range t.Messages {
		lists[m.AgentID] = append(lists[m.AgentID], m)
	}
	return lists
}
