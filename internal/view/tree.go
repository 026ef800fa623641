package view

// Node is an agent in the delegation tree, with its subtree's cost.
type Node struct {
	Agent *Agent
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
}

// Tree returns the delegation tree, rooted at the main agent (nil before it
// starts). It costs O(agents): a view calls it when the tree is drawn.
func (s *State) Tree() *Node {
	nodes := make(map[string]*Node, len(s.Agents))
	var root *Node
	for _, a := range s.Agents {
		n := &Node{Agent: a, Delegation: s.byChild[a.ID], Refused: a.Refused}
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
	n.SubtreeTokens, n.SubtreeCached, n.SubtreeCost = n.Agent.OwnTokens, n.Agent.CachedTokens, n.Agent.Cost
	for _, c := range n.Children {
		n.SubtreeTokens += subtree(c)
		n.SubtreeCached += c.SubtreeCached
		n.SubtreeCost = n.SubtreeCost.Plus(c.SubtreeCost)
	}
	return n.SubtreeTokens
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
