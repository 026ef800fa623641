package view

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/delegationstudio/studio/internal/i18n"
)

// TreeLayout is the delegation tree placed for drawing: boxes, the rounds
// that group them and the edges between them, in pixels.
//
// The main agent sits at the top left, where the tree's box opens. Under
// each agent its rounds follow one another down, in time order (a later
// round is a later assistant message of that agent), each with its label;
// the members of a round (the task calls of one message, run at once)
// stand side by side on one bus, and wrap onto more lines past MaxWidth,
// so a fan-out of fifty children is a few rows, not a 10,000-pixel line.
type TreeLayout struct {
	Width, Height int
	Nodes         []PlacedNode
	Edges         []Edge
	Rounds        []PlacedRound
}

// PlacedNode is a box of the tree: an agent, or a refused delegation.
type PlacedNode struct {
	X, Y, W, H int
	AgentID    string // "" for a refusal
	ParentID   string
	Name       string
	Mode       string // isolated, fork, or "" for the main agent
	Status     string // running, done, failed; "refused" for a refusal
	Calls      int
	Tokens     int // own input tokens
	Subtree    int
	Cached     int    // own input tokens a prompt cache can serve
	Reason     string // why a refusal was refused
	// RefusalMessageID is the tool result that told the parent of a refusal.
	RefusalMessageID string
	// Task is the task it was given, whole (main: the session's prompt).
	Task string
	// NameText is its name as drawn, fitted to the box beside its mode
	// (a refusal's: marked refused); TaskText an agent's id and task, fitted.
	// The edge words the rest from the data: the counters (the box keeps
	// room for the widest, countersWidth) and the accessible name.
	NameText, TaskText string
	// Round is its round's number under its parent (0 for the main agent).
	Round    int
	Selected bool
	// Current: its call is the step the page shows.
	Current bool
}

// PlacedRound is a round's label: X, Y is where its text starts (baseline),
// W how wide it is as LayoutOptions.Words worded it. The label is its number, how many
// ran at once (when Parallel) and the step of the message that asked for
// them (when Step > 0); the edge words them.
type PlacedRound struct {
	X, Y, W  int
	ParentID string
	Number   int
	Members  int
	Parallel bool
	Step     int
}

// Edge joins a parent to a child along its round's bus, as an SVG path;
// Blocked for a refused delegation, Parallel for a member of a fan-out.
type Edge struct {
	Path     string
	ParentID string
	ChildID  string
	Blocked  bool
	Parallel bool
}

// LayoutOptions say what the tree marks and how wide it may grow.
type LayoutOptions struct {
	Selected, Current string
	// Prompt is the main agent's task: the session's prompt.
	Prompt string
	// MaxWidth is where a round wraps (0: DefaultTreeWidth).
	MaxWidth int
	// Words words the texts the layout measures, in the reader's language
	// (nil: they take no room).
	Words Wording
}

// Wording words the tree's texts that take room, as the page draws them: the
// layout measures them, the edge (web/templates) words them.
type Wording interface {
	// Round is a round's label.
	Round(r PlacedRound) string
	// NoTask stands in a box for an empty task.
	NoTask() string
	// Refused is a refusal's texts: its mark beside its name, why it was
	// refused, and who asked.
	Refused(n PlacedNode) (mark, why, askedBy string)
}

type noWords struct{}

func (noWords) Round(PlacedRound) string                    { return "" }
func (noWords) NoTask() string                              { return "" }
func (noWords) Refused(PlacedNode) (string, string, string) { return "", "", "" }

// DefaultTreeWidth is as wide as the session page's tree box at its widest.
const DefaultTreeWidth = 1140

// Sizes of the layout, in px. The font sizes are the CSS's (.node text).
const (
	nodeH     = 60
	minNodeW  = 150
	maxNodeW  = 300
	padIn     = 10 // inside a box
	pad       = 12 // around the tree
	indent    = 28 // a round's members from their parent's left edge
	spine     = 14 // the parent's spine from its left edge
	roundHead = 20 // a round's label line
	busGap    = 12 // from a bus to its members' tops
	gapX      = 14
	lineGap   = 14
	roundGap  = 10
	nameSize  = 13.0
	textSize  = 12.0
	statSize  = 11.0
	labelGap  = 8.0
	maxTaskW  = 200.0
	// callDigits is how many digits of a call count a box holds room for.
	callDigits = 3
)

// countersWidth is the room a box keeps for its counters line: the widest
// status, calls of at least callDigits digits, and the widest compact token
// count. A box grows only when its calls pass a power of ten beyond that,
// which CountersGrew says.
func countersWidth(calls int) float64 {
	digits := max(len(strconv.Itoa(calls)), callDigits)
	return regular().width("running · "+strings.Repeat("0", digits)+" calls", statSize) + labelGap +
		regular().width("00.0M tok", statSize)
}

// CountersGrew reports whether an agent's box needs more room for its
// counters, going from calls before to calls after: the tree must then be
// laid out again.
func CountersGrew(before, after int) bool {
	return len(strconv.Itoa(after)) > max(len(strconv.Itoa(before)), callDigits)
}

// CompactTokens writes a token count in at most five characters, to three
// figures: 9,999, 12.3k, 456k, 2.61M.
func CompactTokens(n int) string {
	if n < 10_000 {
		return Thousands(n)
	}
	f, unit := float64(n)/1000, "k"
	if f >= 999.5 {
		f, unit = f/1000, "M"
	}
	if f >= 999.5 {
		f, unit = f/1000, "G"
	}
	digits := 0
	switch {
	case f < 9.995:
		digits = 2
	case f < 99.95:
		digits = 1
	}
	return strconv.FormatFloat(f, 'f', digits, 64) + unit
}

// block is a laid-out subtree, its coordinates relative to its top left.
type block struct {
	w, h   int
	nodes  []PlacedNode
	edges  []Edge
	rounds []PlacedRound
}

func (b *block) add(o *block, dx, dy int) {
	for _, n := range o.nodes {
		n.X += dx
		n.Y += dy
		b.nodes = append(b.nodes, n)
	}
	for _, e := range o.edges {
		e.Path = shiftPath(e.Path, dx, dy)
		b.edges = append(b.edges, e)
	}
	for _, r := range o.rounds {
		r.X += dx
		r.Y += dy
		b.rounds = append(b.rounds, r)
	}
}

// Layout places a delegation tree (see TreeLayout). It costs O(agents ×
// depth): each subtree is laid out once and moved into place.
func Layout(root *Node, opt LayoutOptions) TreeLayout {
	var l TreeLayout
	if root == nil {
		return l
	}
	if opt.MaxWidth <= 0 {
		opt.MaxWidth = DefaultTreeWidth
	}
	if opt.Words == nil {
		opt.Words = noWords{}
	}
	if !inTree(root, opt.Selected) {
		opt.Selected = root.Agent.ID // the agent asked for has not started: its parent is where it will be
	}
	b := layoutNode(root, opt, opt.MaxWidth-2*pad)
	var out block
	out.add(b, pad, pad)
	l.Nodes, l.Edges, l.Rounds = out.nodes, out.edges, out.rounds
	l.Width, l.Height = b.w+2*pad, b.h+2*pad
	return l
}

func inTree(n *Node, id string) bool {
	if n.Agent.ID == id {
		return true
	}
	for _, c := range n.Children {
		if inTree(c, id) {
			return true
		}
	}
	return false
}

func layoutNode(n *Node, opt LayoutOptions, avail int) *block {
	box := agentBox(n, opt)
	b := &block{w: box.W, h: nodeH}
	b.nodes = append(b.nodes, box)
	cy := nodeH + 6
	lastBus := -1
	for _, r := range n.Rounds {
		pr := PlacedRound{X: indent, Y: cy + 14, ParentID: n.Agent.ID, Number: r.Number, Members: len(r.Members),
			Parallel: r.Parallel(), Step: r.Step}
		pr.W = int(regular().width(opt.Words.Round(pr), textSize)) + 1
		b.rounds = append(b.rounds, pr)
		b.w = max(b.w, indent+pr.W)
		cy += roundHead
		// Lay the members out, then pack them into lines.
		var kids []*block
		for _, m := range r.Members {
			if m.Child != nil {
				kb := layoutNode(m.Child, opt, avail-indent)
				kb.nodes[0].Round = r.Number
				kids = append(kids, kb)
			} else {
				rb := refusalBox(n, m.Refusal, r.Number, opt.Words)
				kids = append(kids, &block{w: rb.W, h: nodeH, nodes: []PlacedNode{rb}})
			}
		}
		x, lineTop, lineH := indent, cy+busGap, 0
		for i, kb := range kids {
			if x > indent && x+kb.w > avail {
				cy = lineTop + lineH + lineGap
				x, lineTop, lineH = indent, cy+busGap, 0
			}
			b.add(kb, x, lineTop)
			top := kb.nodes[0]
			busY := lineTop - busGap/2 - 1
			cx := x + min(top.W/2, 40)
			e := Edge{Path: fmt.Sprintf("M%d %dV%dH%dV%d", spine, nodeH, busY, cx, lineTop), ParentID: n.Agent.ID,
				ChildID: top.AgentID, Blocked: top.AgentID == "", Parallel: r.Parallel()}
			b.edges = append(b.edges, e)
			lastBus = busY
			_ = i
			x += kb.w + gapX
			lineH = max(lineH, kb.h)
			b.w = max(b.w, x-gapX)
		}
		cy = lineTop + lineH + roundGap
	}
	if lastBus >= 0 {
		b.h = cy - roundGap
	}
	return b
}

// agentBox is an agent's box, its lines fitted to a width measured from them.
func agentBox(n *Node, opt LayoutOptions) PlacedNode {
	a := n.Agent
	p := PlacedNode{AgentID: a.ID, ParentID: a.ParentID, Name: a.Name, Mode: a.Mode, Status: n.Status, Calls: n.Calls,
		Tokens: n.Tokens, Subtree: n.SubtreeTokens, Task: a.Task, H: nodeH, Selected: a.ID == opt.Selected,
		Current: a.ID == opt.Current}
	if a.ParentID == "" && p.Task == "" {
		p.Task = opt.Prompt
	}
	modeW := 0.0
	if p.Mode != "" {
		modeW = regular().width(p.Mode, textSize) + labelGap
	}
	// As wide as the name and mode, the counters as wide as they may grow
	// (so that a box's counters change without moving its neighbours), and
	// some of the task.
	task := a.ID + " · " + quote(p.Task, opt.Words)
	want := max(bold().width(p.Name, nameSize)+modeW, countersWidth(p.Calls), min(regular().width(task, textSize), maxTaskW))
	p.W = min(max(minNodeW, int(want)+1+2*padIn), maxNodeW)
	inner := float64(p.W - 2*padIn)
	p.NameText = bold().fit(p.Name, nameSize, inner-modeW)
	p.TaskText = regular().fit(task, textSize, inner)
	return p
}

// refusalBox is a refused task call's box.
func refusalBox(parent *Node, r *Refusal, round int, words Wording) PlacedNode {
	p := PlacedNode{ParentID: parent.Agent.ID, Name: r.SubagentType, Status: "refused", Reason: r.Reason, H: nodeH,
		RefusalMessageID: r.RefusalMessageID(), Round: round}
	mark, why, asked := words.Refused(p)
	markW := regular().width(mark, textSize) + labelGap
	want := max(bold().width("✗ "+p.Name, nameSize)+markW, regular().width(why, textSize), regular().width(asked, textSize))
	p.W = min(max(minNodeW, int(want)+1+2*padIn), maxNodeW)
	p.NameText = bold().fit("✗ "+p.Name, nameSize, float64(p.W-2*padIn)-markW)
	return p
}

// RefusalMessageID is the tool result that told the parent.
func (r *Refusal) RefusalMessageID() string { return r.MessageID }

func quote(task string, words Wording) string {
	t := oneLine(task)
	if t == "" {
		return words.NoTask()
	}
	return "“" + t + "”"
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Thousands writes 12345 as 12,345 (i18n.Grouped).
func Thousands(n int) string { return i18n.Grouped(n) }

// shiftPath moves an SVG path of absolute M, V and H commands.
func shiftPath(p string, dx, dy int) string {
	var b strings.Builder
	cmd := byte(0)
	coord := 0 // within an M: 0 for x, 1 for y
	for i := 0; i < len(p); {
		c := p[i]
		if c == 'M' || c == 'V' || c == 'H' {
			cmd, coord = c, 0
			b.WriteByte(c)
			i++
			continue
		}
		if c == ' ' {
			b.WriteByte(c)
			i++
			continue
		}
		j := i
		for j < len(p) && (p[j] == '-' || (p[j] >= '0' && p[j] <= '9')) {
			j++
		}
		v, _ := strconv.Atoi(p[i:j])
		switch {
		case cmd == 'H' || (cmd == 'M' && coord == 0):
			v += dx
		default:
			v += dy
		}
		coord++
		b.WriteString(strconv.Itoa(v))
		i = j
	}
	return b.String()
}
