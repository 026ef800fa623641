// Package templates holds the studio's templ components: one per page and
// one per fragment the live view pushes. Components take the view structs
// below, never database rows.
package templates

import (
	"fmt"
	"strconv"
	"time"

	"github.com/delegationstudio/studio/internal/view"
)

// Page is what every page's frame needs.
type Page struct {
	Title string
	CSRF  string // the form token; "" on pages with no form
	Flash string
	// Nav is the section of the nav the page belongs to ("sessions",
	// "lessons", "compare", "teams"), marked aria-current.
	Nav string
	// Summary, after a form came back with problems, heads the page: what
	// went wrong, each with a link to its field.
	Summary *ErrorSummary
}

// ErrorSummary is the list of a form's problems at the top of its page.
// Foreign, when set, is the kind of document given to a form that takes
// another (a trace where a scenario goes), said in one sentence instead.
type ErrorSummary struct {
	Form    string // "scenario", "trace", "team", "team-import", "team-run"
	Foreign string
	Items   []SummaryItem
}

// SummaryItem is one problem and the field it links to.
type SummaryItem struct {
	Field, Message, Href string
}

// SessionRow is a line of the sessions page.
type SessionRow struct {
	ID, Name, Title, Status string
	Agents, ModelCalls      int
	InputTokens             int
	CreatedAt               time.Time
}

// LessonOption is a lesson to start from: its title, what it shows, and
// the articles it comes from, by title.
type LessonOption struct {
	Name, Title, Description string
	Source                   string
	// BothModes: running it every subagent isolated, then fork, teaches something.
	BothModes bool
	// LastRun is when it last ran (zero: never), LastStatus how that run ended.
	LastRun    time.Time
	LastStatus string
}

// FieldError is a problem shown at a form field.
type FieldError struct {
	Field, Message string
}

// SessionsPage is the list of sessions and the forms to start or import one.
type SessionsPage struct {
	Page
	Sessions []SessionRow
	Lessons  []LessonOption
	// What the user typed, kept when a form comes back with errors.
	Scenario     string
	ScenarioErrs []FieldError
	TraceText    string
	TraceErrs    []FieldError
	Endpoints    []Choice // configured model endpoints: name, and a label for a person
}

// MessageView is one message in a context pane.
type MessageView struct {
	ID, AgentID, Role, Kind string
	Index                   int
	Preview                 string // the first part of the text
	More                    bool   // the text is longer than the preview
	Reasoning               string // a reasoning model's thinking, its own part: not sent back, not counted
	ToolCalls               []ToolCallView
	ToolCallID              string
	IsError                 bool
	Tokens                  int
	Inherited               bool   // a fork child's message that is its parent's
	Mark                    string // "call" or "receipt": the delegation's two messages in the parent
	URL                     string // the whole message
	Gap                     int    // for a gap: how many messages it stands for (the list is too long to show whole)
}

// Key names a message on the page by its place: "<agent>:<index>".
func (m MessageView) Key() string { return m.AgentID + ":" + itoa(m.Index) }

// ToolCallView is a tool call of an assistant message.
type ToolCallView struct {
	ID, Name, Args string
}

// ToolView is a tool definition's cost.
type ToolView struct {
	Name   string
	Tokens int
}

// ContextView is one agent's context at a model call: what that call
// received, message by message. On a session page it is a pane of a
// delegation (PaneID), which grows with the agent while it Follows it.
type ContextView struct {
	PaneID, Follows, TaskCallID string
	AgentID, AgentName, Mode    string
	NotStarted                  bool // the agent has not started yet
	HasCall                     bool
	CallID                      string
	CallIndex                   int
	InputTokens                 int
	System                      string
	SystemTokens                int
	Tools                       []ToolView
	ToolTokens                  int
	Inherited                   []MessageView // from other agents' lists (a fork's), with a gap when long
	Messages                    []MessageView // its own, with a gap when long
	InheritedCount              int
	InheritedTokens             int
	// Cache is what a prompt cache can serve of the call; ToolsCached and
	// SystemCached say whether the tools and the system prompt are in that
	// shared prefix (messages say so each, Cached).
	Cache                     CacheView
	ToolsCached, SystemCached bool
	// CachedMessageTokens are the tokens of its messages in that prefix.
	CachedMessageTokens int
	// Prefix says, for a child, whose prompt prefix its first call began
	// with: "parent" (a fork with the parent's tools and system prompt),
	// "own-tools", "own-system" (a fork that lost it), or "own" (isolated).
	Prefix string
}

// DelegationView is a delegation side by side: what the parent holds (its
// call and the receipt) and what the child held.
type DelegationView struct {
	ChildID, ChildName, Mode, Status, Task string
	Parent                                 ContextView
	Child                                  ContextView
	CameBack                               CameBackView
	HeldBack                               HeldBackView
}

// HeldBackView is what of a delegation stayed in the child.
type HeldBackView struct {
	ChildID  string
	Finished bool
	Held     []string // the state keys delegation.finished says stayed
	Todos    []TodoView
}

// TodoView is an item of a todo list.
type TodoView struct {
	Content, Status string
}

// CameBackView is what came back of a delegation.
type CameBackView struct {
	ChildID        string
	ChildStatus    string
	Receipt        *MessageView
	ReceiptEmpty   bool
	Finished       bool
	FilesBack      []string
	FilesBackCount int
	// Economics: what the child's subtree cost ("" when not priced), and
	// what the receipt kept out of the parent's later calls.
	ChildCost       string
	KeptPerCall     int
	LaterCalls      int
	KeptTokens      int
	KeptCost        string
	EntryTokens     int
	EntryCached     int
	ChildCachedSum  int
	ChildInputTotal int
}

// DelegationPanel is the session page's delegation panel: the delegation
// Shown (the one asked for, or the first), or a list to pick one from.
type DelegationPanel struct {
	SessionID string
	Show      string // the child asked for; "" for the first delegation
	Selected  *DelegationView
	Children  []LessonOption // name = agent id, title = label
}

// TotalsView counts a session so far: its agents, calls, input tokens, the
// part of those a prompt cache can serve, and what they cost ("" when no
// call is priced).
type TotalsView struct {
	Agents, Calls, Tokens, Cached int
	Cost                          string
}

// CacheView is what a prompt cache can serve of a call (the studio's
// estimate: the longest prefix an earlier request of the session had too)
// and, where the endpoint reported its own figure, that figure.
type CacheView struct {
	Cached, Input int
	Reported      bool
	ReportedCache int
	Cost          string // what the call cost, "" when not priced
	CostBasis     string
}

// New is the input a cache cannot serve.
func (c CacheView) New() int { return c.Input - c.Cached }

// Diff is the endpoint's figure less the studio's estimate.
func (c CacheView) Diff() int { return c.ReportedCache - c.Cached }

// TimelineRow is a model call in the timeline of turns.
type TimelineRow struct {
	CallID, AgentID, AgentName, Purpose string
	Index                               int
	Step                                int // among the session's calls, from 1
	Depth                               int
	InputTokens, OutputTokens           int
	DurationMS                          int64
	Running                             bool
	StartedAt                           time.Time
	Stream                              string // text streamed so far, while running
	Output                              string
	ToolCalls                           []string
	Error                               string
	Reported                            int // input tokens the program reported, 0 when it did not
	Cache                               CacheView
	Gap                                 int    // for a gap: how many calls it stands for
	GapURL                              string // where they all are
}

// ScrubAgent is what one agent's context held at a step.
type ScrubAgent struct {
	AgentID, Name string
	Calls         int // model calls so far
	Messages      int // messages its latest call received
	Tokens        int // input tokens of its latest call
	Current       bool
	NotStarted    bool
}

// ScrubView is the step scrubber: every agent's context at one model call.
// It Follows the newest call unless a step was asked for.
type ScrubView struct {
	Step, Steps int
	Follow      bool
	// The call at the step: its agent's name and its index among its calls.
	CallAgent string
	CallIndex int
	Agents    []ScrubAgent
}

// FileView is a file of the main agent's filesystem.
type FileView struct {
	Path, Preview string
	Size          int
}

// FilesView is the first page of main's files, of Count.
type FilesView struct {
	SessionID string
	Files     []FileView
	Count     int
	// Next is the link to the files after this page ("" for none).
	Next string
}

// SessionPage is a session: its tree, timeline, context panes and scrubber.
type SessionPage struct {
	Page
	ID, Name, Title, Prompt, Status, Error, Tokenizer string
	CreatedAt                                         time.Time
	LastSeq                                           int64
	Running                                           bool
	Tree                                              view.TreeLayout
	Agents, Calls, Tokens                             int
	Totals                                            TotalsView
	Timeline                                          []TimelineRow
	TimelineAll                                       bool
	Delegation                                        DelegationPanel
	Scrub                                             ScrubView
	Files                                             FilesView
	Answer                                            string
	Notes                                             []NoteGroup
	// Origin is where the session came from, for a person; Received is
	// true when someone else's program ran it (nothing to re-run here).
	Origin   string
	Received bool
	// Traced: it was built from an OTLP trace, whose Spans (those that
	// map to nothing of ours) are listed; a recorded session has none.
	Traced bool
	Spans  []SpanRow
	// RunOf is the run the session belongs to, when it does: a lesson's,
	// both modes of a scenario, a team's.
	RunOf RunLink
}

// RunLink points from a session to the run it is part of.
type RunLink struct {
	Label, Link, URL string
}

// NoteGroup is the notes of one kind, in the order found.
type NoteGroup struct {
	Kind  string
	Texts []string
}

// SpanRow is a received span kept as it came (span.received).
type SpanRow struct {
	SpanID, ParentSpanID, Name, Kind string
	DurationMS                       int64
	Error                            string
	Orphan                           bool
	Attributes                       int
}

// FilesPage lists main's files a page at a time.
type FilesPage struct {
	Page
	SessionID, Name string
	Files           FilesView
}

func itoa(n int) string { return strconv.Itoa(n) }

func boolText(b bool) string { return strconv.FormatBool(b) }

// Plural writes "1 message", "3 messages" or "1,234 messages".
func Plural(n int, word string) string { return plural(n, word) }

// plural writes "1 message", "3 messages" or "1,234 messages".
// signedInt is n with its sign: +12, -3, 0.
func signedInt(n int) string {
	if n > 0 {
		return "+" + Thousands(n)
	}
	if n < 0 {
		return "-" + Thousands(-n)
	}
	return "0"
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return Thousands(n) + " " + word + "s"
}
func i64(n int64) string          { return strconv.FormatInt(n, 10) }
func sessionURL(id string) string { return "/sessions/" + id }

// Thousands writes 12345 as 12,345.
func Thousands(n int) string {
	s := strconv.Itoa(n)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// Age says how long ago t was, briefly.
func Age(t time.Time, now time.Time) string {
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return t.Format("2006-01-02")
}

func chartPoints(ps []ChartPoint) string {
	var b []byte
	for i, p := range ps {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendInt(b, int64(p.X), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(p.Y), 10)
	}
	return string(b)
}

// Delta writes b − a with its sign: "+1,389", "−12", "0".
func Delta(a, b int) string {
	switch d := b - a; {
	case d > 0:
		return "+" + Thousands(d)
	case d < 0:
		return "−" + Thousands(-d)
	}
	return "0"
}

// Percent writes b − a as a share of a: "+25 %", "−3.2 %"; "new" when a is
// 0 and b is not.
func Percent(a, b int) string { return PercentOf(float64(a), float64(b)) }

// PercentOf is Percent of any two figures.
func PercentOf(a, b float64) string {
	if a == b {
		return "0 %"
	}
	if a == 0 {
		return "new"
	}
	p := (b - a) * 100 / a
	s := strconv.FormatFloat(p, 'f', 1, 64)
	if p >= 10 || p <= -10 {
		s = strconv.FormatFloat(p, 'f', 0, 64)
	}
	if p > 0 {
		s = "+" + s
	} else {
		s = "−" + s[1:]
	}
	return s + " %"
}

// figureText writes one side of a figure.
func figureText(f Figure, x float64) string {
	if f.Dollars {
		return view.Dollars(x)
	}
	return Thousands(int(x))
}

// figureDelta writes B − A of a figure with its sign.
func figureDelta(f Figure) string {
	if !f.Dollars {
		return Delta(int(f.A), int(f.B))
	}
	switch {
	case f.B > f.A:
		return "+" + view.Dollars(f.B-f.A)
	case f.B < f.A:
		return "−" + view.Dollars(f.A-f.B)
	}
	return "0"
}

// subtreeCost is what an agent's subtree cost, "—" when not priced.
func subtreeCost(a *AgentCost) string {
	if a == nil || !a.Priced {
		return "—"
	}
	return a.SubtreeCost
}

func costOf(a *AgentCost, what string) int {
	switch what {
	case "cached":
		return a.EntryCached
	case "entry":
		return a.Entry
	case "own":
		return a.Own
	case "subtree":
		return a.Subtree
	}
	return 0
}

func costText(a *AgentCost, what string) string {
	if a == nil {
		return "—"
	}
	return Thousands(costOf(a, what))
}

func pairDelta(p AgentPair, what string) string {
	if p.A == nil || p.B == nil {
		return "—"
	}
	return Delta(costOf(p.A, what), costOf(p.B, what))
}

// shareText is the tokens of an agent's entry cost it inherited, and
// their share of it: "39 (3.6 %)".
func shareText(a *AgentCost) string {
	if a == nil || a.Mode == "" {
		return "—"
	}
	if a.Entry == 0 || a.Inherited == 0 {
		return "0"
	}
	p := float64(a.Inherited) * 100 / float64(a.Entry)
	prec := 1
	if p >= 10 {
		prec = 0
	}
	return Thousands(a.Inherited) + " (" + strconv.FormatFloat(p, 'f', prec, 64) + " %)"
}

func agentDiffers(p AgentPair) bool {
	if p.A == nil || p.B == nil {
		return true
	}
	return p.A.Mode != p.B.Mode || p.A.Entry != p.B.Entry || p.A.Inherited != p.B.Inherited || p.A.Own != p.B.Own || p.A.Subtree != p.B.Subtree ||
		p.A.EntryCached != p.B.EntryCached || p.A.SubtreeCost != p.B.SubtreeCost
}
