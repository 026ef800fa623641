package view

import (
	"slices"

	"github.com/delegationstudio/studio/internal/delegation"
)

// Node is an agent in the delegation tree, with its subtree's cost.
type Node struct {
	Agent *Agent
	// Status, Calls and Tokens are the agent's as the tree shows them: now,
	// or at a step of the past (TreeAt).
	Status        string
	Calls, Tokens int
	// SubtreeTokens is the input tokens of its calls and its descendants',
	// each counted once; SubtreeCached their cached prefixes and
	// SubtreeCost their cost.
	SubtreeTokens, SubtreeCached int
	SubtreeCost                  Money
	// Delegation is the task call that started it (nil for the main agent).
	Delegation *Delegation
	Children   []*Node
	// Refused are its task calls that started no child.
	Refused []Refusal
	// Rounds are its children and refusals by the assistant message that
	// asked for them, in time order: the members of a round ran at once.
	Rounds []*Round
}

// Round is a batch of an agent's task calls: those of one assistant
// message, which ran at once (a fan-out when there are several). A later
// round is a later message.
type Round struct {
	Number      int // from 1, in time order
	Batch, Step int // the assistant message's index and its model call's step (Delegation)
	Members     []Member
}

// Member is a child of a round, or a refused task call.
type Member struct {
	Child   *Node
	Refusal *Refusal
}

// Parallel reports whether the round ran several task calls at once.
func (r *Round) Parallel() bool { return len(r.Members) > 1 }

// AgentAt is an agent's counters at a step of the past.
type AgentAt struct {
	Calls, Tokens int
}

// Tree returns the delegation tree, rooted at the main agent (nil before it
// starts). It costs O(agents): a view calls it when the tree is drawn.
func (s *State) Tree() *Node { return s.tree(0, nil) }

// TreeAt returns the tree as it was at a seq: the agents started by then,
// running or done as they were, with the counters given (by agent id).
func (s *State) TreeAt(seq int64, at map[string]AgentAt) *Node { return s.tree(seq, at) }

func (s *State) tree(seq int64, at map[string]AgentAt) *Node {
	nodes := make(map[string]*Node, len(s.Agents))
	var root *Node
	for _, a := range s.Agents {
		if seq > 0 && a.StartSeq > seq {
			continue
		}
		n := &Node{Agent: a, Delegation: s.byChild[a.ID], Status: a.Status, Calls: a.Calls, Tokens: a.OwnTokens}
		for _, r := range a.Refused {
			if seq == 0 || r.Seq <= seq {
				n.Refused = append(n.Refused, r)
			}
		}
		if seq > 0 {
			n.Calls, n.Tokens = at[a.ID].Calls, at[a.ID].Tokens
			if a.EndSeq == 0 || a.EndSeq > seq {
				n.Status = delegation.StatusRunning
			}
		}
		nodes[a.ID] = n
		if a.ParentID == "" {
			if root == nil {
				root = n
			}
		} else if p := nodes[a.ParentID]; p != nil {
			p.Children = append(p.Children, n)
		}
	}
	if root != nil {
		subtree(root)
	}
	return root
}

func subtree(n *Node) int {
	n.Rounds = rounds(n)
	n.SubtreeTokens, n.SubtreeCached, n.SubtreeCost = n.Tokens, n.Agent.CachedTokens, n.Agent.Cost
	for _, c := range n.Children {
		n.SubtreeTokens += subtree(c)
		n.SubtreeCached += c.SubtreeCached
		n.SubtreeCost = n.SubtreeCost.Plus(c.SubtreeCost)
	}
	return n.SubtreeTokens
}

// rounds groups a node's children and refusals by the assistant message
// that asked for them, in the order they were asked for.
func rounds(n *Node) []*Round {
	type item struct {
		seq         int64
		batch, step int
		m           Member
	}
	var items []item
	for _, c := range n.Children {
		it := item{seq: c.Agent.StartSeq, batch: -1, m: Member{Child: c}}
		if d := c.Delegation; d != nil {
			it.seq, it.batch, it.step = d.Seq, d.Batch, d.Step
		}
		items = append(items, it)
	}
	for i := range n.Refused {
		r := &n.Refused[i]
		items = append(items, item{seq: r.Seq, batch: r.Batch, step: r.Step, m: Member{Refusal: r}})
	}
	slices.SortStableFunc(items, func(a, b item) int { return int(a.seq - b.seq) })
	var out []*Round
	byBatch := map[[2]int]*Round{}
	for _, it := range items {
		key := [2]int{it.batch, it.step}
		r := byBatch[key]
		if r == nil || it.batch < 0 {
			r = &Round{Number: len(out) + 1, Batch: it.batch, Step: it.step}
			out = append(out, r)
			byBatch[key] = r
		}
		r.Members = append(r.Members, it.m)
	}
	return out
}

// SubtreeTokens is an agent's input tokens and its descendants', O(agents).
func (s *State) SubtreeTokens(id string) int {
	total := 0
	for _, a := range s.Agents {
		for x := a; x != nil; x = s.agents[x.ParentID] {
			if x.ID == id {
				total += a.OwnTokens
				break
			}
		}
	}
	return total
}
