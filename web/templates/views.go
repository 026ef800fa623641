// Package templates holds the studio's templ components: one per page and
// one per fragment the live view pushes. Components take the view structs
// below, never database rows.
package templates

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/a-h/templ"

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
	// Here is the page's own address, path and query, which the language
	// switch links back to.
	Here string
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
	GapFrom                 int    // for a gap: the position it starts at, in its list
	// Cut is the summarization a summary message stands for.
	Cut *CutView
	// Evicted is set when its text went to a file and it holds the pointer.
	Evicted *EvictedView
}

// EvictedView is a message whose text was too big for the model and went
// to a file (delegation.md §12): the text's characters and tokens, the
// pointer's tokens, and the file.
type EvictedView struct {
	Chars, TokensBefore, TokensAfter int
	FilePath, FileURL                string
}

// CutView is where a summarization cut an agent's history: how many
// messages it folded into the summary, its context's tokens before and
// after, and the file the folded history went to.
type CutView struct {
	Folded                    int
	TokensBefore, TokensAfter int
	FilePath, FileURL         string
	Step                      int // of the call that wrote the summary (0: unknown)
}

// Key names a message on the page by its place: "<agent>:<index>".
func (m MessageView) Key() string { return m.AgentID + ":" + itoa(m.Index) }

// ToolCallView is a tool call of an assistant message.
type ToolCallView struct {
	ID, Name, Args string
	// Others stands for the other calls of a message folded beside the one
	// a pane marks: how many.
	Others int
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
	SessionID                   string
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
	// InheritedURL, on a delegation's pane, loads the inherited messages
	// when the user opens them (Inherited is then empty): a fork inherits
	// the parent's whole history, which a live patch need not carry.
	InheritedURL string
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
	// Step is the call's among the session's calls (0: unknown).
	Step int
	// CallMessageID and ReceiptID are the delegation's two messages in a
	// parent's pane, to jump to ("" when not in it, or not in yet).
	CallMessageID, ReceiptID string
	// Focused: the pane folds the history around the call and the receipt.
	Focused bool
	// At is the step the pane is drawn at (0: it follows its agent).
	At int
	// StreamCallID is its call under way, with the text streamed so far.
	StreamCallID, Stream string
}

// DelegationView is a delegation side by side: what the parent holds (its
// call and the receipt) and what the child held.
type DelegationView struct {
	ChildID, ChildName, Mode, Status, Task string
	Parent                                 ContextView
	Child                                  ContextView
	CameBack                               CameBackView
	HeldBack                               HeldBackView
	Economics                              EconomicsView
	Calls                                  CallsView
}

// HeldBackView is what of a delegation stayed in the child: its own
// messages, counted, and its todo list.
type HeldBackView struct {
	ChildID                 string
	Finished                bool
	Held                    []string // the state keys delegation.finished says stayed
	Messages, MessageTokens int
	Todos                   []TodoView
}

// TodoView is an item of a todo list.
type TodoView struct {
	Content, Status string
}

// EconomicsView is a delegation counted: what the child worked through
// against what came back to its parent.
type EconomicsView struct {
	ChildID                    string
	Finished                   bool
	Messages, MessageTokens    int // its own messages
	Inherited, InheritedTokens int // a fork's inherited history
	ModelCalls, InputTokens    int // its calls and their input, summed
	ToolCalls                  int
	ReceiptTokens              int
	Files                      int
	// Ratio is MessageTokens per receipt token, written for a person
	// ("340 : 1"); "" while nothing came back.
	Ratio string
	// Evicted is what eviction kept out of the child's calls (view.Evicted).
	Evicted EvictedCount
	// ReceiptEvicted, when the receipt went to a file, is what that kept
	// out of the parent's later calls (view.State.ReceiptEvicted).
	ReceiptEvicted *EvictedCount
}

// EvictedCount is an agent's evictions counted (view.Evicted): its own
// messages that went to files, their tokens and their pointers', and its
// calls that read a pointer with the tokens they did not read.
type EvictedCount struct {
	Messages, Tokens, PointerTokens, Calls, Saved int
}

// CallsView lists an agent's model calls: each links to its whole context.
type CallsView struct {
	AgentID, AgentName string
	Count              int
	Rows               []CallRowView
}

// CallRowView is one model call in an agent's list, or a gap.
type CallRowView struct {
	ID, URL     string
	Step        int // among the session's calls, from 1
	Number      int // among its agent's calls, from 1
	InputTokens int
	Purpose     string
	Gap         int
	GapURL      string
}

// AgentPanel is the panel of an agent that no delegation started (the main
// agent): its own context now (or at the page's step), its calls and the
// delegations it made.
type AgentPanel struct {
	AgentID, Name, Task string
	Context             ContextView
	Calls               CallsView
	Delegations         []LessonOption // name = child id, title = label
	None                bool           // no delegation yet
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
	ChildCost string
	// ChildWriteCost is what of ChildCost went to writing the prompt
	// cache at the cache-write surcharge ("" when nothing did).
	ChildWriteCost  string
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
	Show      string // the agent asked for; "" for the first delegation
	Selected  *DelegationView
	Agent     *AgentPanel // when the agent shown is one no delegation started
	At        int         // the step it is drawn at (0: now)
	Shown     string      // the agent it shows: the tree marks it
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
	// Written is what the endpoint reported writing to its cache
	// (Anthropic's cache creation); WriteCost what those tokens cost at the
	// price's cache-write surcharge ("" when unpriced or not surcharged).
	Written   int
	WriteCost string
	Cost      string // what the call cost, "" when not priced
	CostBasis string
}

// New is the input a cache cannot serve.
func (c CacheView) New() int { return c.Input - c.Cached }

// Diff is the endpoint's figure less the studio's estimate.
func (c CacheView) Diff() int { return c.ReportedCache - c.Cached }

// ScrubAgent is what one agent's context held at a step.
type ScrubAgent struct {
	AgentID, Name string
	Calls         int // model calls so far
	Messages      int // messages its latest call received
	Tokens        int // input tokens of its latest call
	Current       bool
	NotStarted    bool
	CallURL       string // its latest call's page
	CallStep      int    // and its step
}

// ScrubView is the step scrubber: every agent's context at one model call.
// It Follows the newest call unless a step was asked for.
type ScrubView struct {
	SessionID   string
	Step, Steps int
	Follow      bool
	// The call at the step: its agent, its number among its calls (from 1)
	// and its page; what it received and answered.
	CallAgent, CallAgentID string
	CallNumber             int
	CallURL                string
	InputTokens            int
	Cache                  CacheView
	Answer                 string
	Agents                 []ScrubAgent
}

// Waterfall is the timeline: a lane per agent, a bar per model call and
// per tool call from its start to its end, on one time axis. It shows the
// last Window steps and follows the session (Follow), or every step (All),
// or the steps up to the page's step as they were then (At).
type Waterfall struct {
	SessionID string
	Follow    bool
	All       bool
	At        int
	// From and To are the steps shown, from 1; Steps is every step.
	From, To, Steps int
	// T0 and Span are the time the bars' axis covers, in ms from the
	// session's start; Now is the time of the log's last event, how far a
	// running bar reaches.
	T0, Span, Now int64
	Lanes         []Lane
	Ticks         []Tick
	// Marker is the start of the step the page shows (-1: none).
	Marker int64
	AllURL string
}

// Lane is an agent's row of the timeline with its bars.
type Lane struct {
	AgentID, Name, URL string
	Depth              int
	Bars               []Bar
}

// Bar is a model call or a tool call in its agent's lane.
type Bar struct {
	ID      string // element id: "bar-<call>" or "tool-<tool call>"
	Kind    string // model, summary, tool, task
	Step    int
	S, D    int64 // start and duration, ms from the session's start
	Running bool
	Error   bool
	Current bool
	URL     string
	Title   string
}

// Tick is a label of the time axis, at Pct percent of its width.
type Tick struct {
	Pct   string
	Label string
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
	StoppedBy                                         string // why it was stopped: a code (delegation.Stop*)
	Code                                              string // why it failed: an error code (delegation.EFULL), "" when Error says
	CreatedAt                                         time.Time
	LastSeq                                           int64
	Running                                           bool
	Tree                                              view.TreeLayout
	Agents, Calls, Tokens                             int
	Totals                                            TotalsView
	Timeline                                          Waterfall
	Delegation                                        DelegationPanel
	Scrub                                             ScrubView
	// At is the step the page shows (0: now).
	At     int
	Files  FilesView
	Answer string
	Notes  []NoteGroup
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
	// Panels are the page's live panels, by name, drawn by the components
	// their live patches draw (internal/present describes each once).
	Panels map[string]templ.Component
}

// Panel is the page's panel name, where the page places it.
func (v SessionPage) Panel(name string) templ.Component {
	if c, ok := v.Panels[name]; ok {
		return c
	}
	return templ.ComponentFunc(func(context.Context, io.Writer) error {
		return fmt.Errorf("the session page has no panel %q", name)
	})
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

// refusalURL opens the tool result that told the parent of a refusal, or
// the parent's panel until it is in.
func refusalURL(sessionID string, n view.PlacedNode) string {
	if n.RefusalMessageID != "" {
		return MessageURL(sessionID, n.RefusalMessageID)
	}
	return AgentURL(sessionID, n.ParentID)
}

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

func i64(n int64) string { return strconv.FormatInt(n, 10) }

// Thousands writes 12345 as 12,345.
func Thousands(n int) string { return view.Thousands(n) }

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

// trackBox is a lane's viewBox: the axis's time across, 20 units down.
func trackBox(w Waterfall) string {
	return i64(w.T0) + " 0 " + i64(max(w.Span, 1)) + " 20"
}

// barWidth is a bar's length in ms: a running one reaches the log's last
// event (the page's script goes on growing it).
func barWidth(w Waterfall, b Bar) int64 {
	if b.Running {
		return max(w.Now-b.S, 0)
	}
	return max(b.D, 0)
}
