package view

// TreeLayout is the delegation tree placed for drawing: boxes and the edges
// between them, in pixels.
type TreeLayout struct {
	Width, Height int
	Nodes         []PlacedNode
	Edges         []Edge
}

// PlacedNode is a box of the tree: an agent, or a refused delegation.
type PlacedNode struct {
	X, Y, W, H int
	AgentID    string // "" for a refusal
	Name       string
	Mode       string // isolated, fork, or "" for the main agent
	Status     string // running, done, failed; "refused" for a refusal
	Calls      int
	Tokens     int // own input tokens
	Subtree    int
	Cached     int    // own input tokens a prompt cache can serve
	CostNote   string // ", $0.0123 ($0.0456 with its subagents)" when priced, else ""
	Reason     string // why a refusal was refused
	Selected   bool
}

// Edge joins a parent's box to a child's; Blocked for a refused delegation.
type Edge struct {
	X1, Y1, X2, Y2 int
	ChildID        string
	Blocked        bool
}

// Sizes of the layout.
const (
	nodeW = 176
	nodeH = 58
	gapX  = 24
	gapY  = 56
	pad   = 12
)

// Layout places a delegation tree: each leaf takes the next column, and a
// parent sits centred over its children, so parallel siblings stand side
// by side and nothing overlaps.
func Layout(root *Node, selected string) TreeLayout {
	var l TreeLayout
	if root == nil {
		return l
	}
	col := 0
	var place func(n *Node, depth int) (center int)
	place = func(n *Node, depth int) int {
		y := pad + depth*(nodeH+gapY)
		var centers []int
		var childIDs []string
		var blocked []bool
		for _, c := range n.Children {
			centers = append(centers, place(c, depth+1))
			childIDs = append(childIDs, c.Agent.ID)
			blocked = append(blocked, false)
		}
		for _, r := range n.Refused {
			x := pad + col*(nodeW+gapX)
			col++
			l.Nodes = append(l.Nodes, PlacedNode{X: x, Y: y + nodeH + gapY, W: nodeW, H: nodeH,
				Name: r.SubagentType, Status: "refused", Reason: r.Reason})
			centers = append(centers, x+nodeW/2)
			childIDs = append(childIDs, "")
			blocked = append(blocked, true)
		}
		var cx int
		if len(centers) == 0 {
			cx = pad + col*(nodeW+gapX) + nodeW/2
			col++
		} else {
			cx = (centers[0] + centers[len(centers)-1]) / 2
		}
		a := n.Agent
		l.Nodes = append(l.Nodes, PlacedNode{X: cx - nodeW/2, Y: y, W: nodeW, H: nodeH, AgentID: a.ID, Name: a.Name,
			Mode: a.Mode, Status: a.Status, Calls: a.Calls, Tokens: a.OwnTokens, Subtree: n.SubtreeTokens,
			Cached: a.CachedTokens, CostNote: costNote(n),
			Selected: a.ID == selected})
		for i, c := range centers {
			l.Edges = append(l.Edges, Edge{X1: cx, Y1: y + nodeH, X2: c, Y2: y + nodeH + gapY, ChildID: childIDs[i], Blocked: blocked[i]})
		}
		return cx
	}
	place(root, 0)
	for _, n := range l.Nodes {
		l.Width = max(l.Width, n.X+n.W+pad)
		l.Height = max(l.Height, n.Y+n.H+pad)
	}
	return l
}
