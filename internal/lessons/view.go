package lessons

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

// view reads a trace the way the lessons' tables need: agents by name, model
// calls by agent, what each call received, events by type.
type view struct {
	t     *trace.Trace
	lists map[string][]trace.Message
}

func newView(t *trace.Trace) *view {
	return &view{t: t, lists: trace.Lists(t)}
}

// agents returns the agents of that name, in the order they started.
func (v *view) agents(name string) []trace.Agent {
	var out []trace.Agent
	for _, a := range v.t.Agents {
		if a.Name == name {
			out = append(out, a)
		}
	}
	return out
}

// agent returns the first agent of that name.
func (v *view) agent(name string) (trace.Agent, error) {
	as := v.agents(name)
	if len(as) == 0 {
		return trace.Agent{}, fmt.Errorf("session %q has no agent named %q", v.t.Session.Name, name)
	}
	return as[0], nil
}

// turns returns an agent's model calls for its turns (summaries left out), in
// order.
func (v *view) turns(agentID string) []trace.ModelCall {
	var out []trace.ModelCall
	for _, c := range v.t.ModelCalls {
		if c.AgentID == agentID && c.Purpose != string(delegation.PurposeSummary) {
			out = append(out, c)
		}
	}
	return out
}

// firstCall is an agent's first turn: what starting it cost.
func (v *view) firstCall(agentID string) (trace.ModelCall, error) {
	cs := v.turns(agentID)
	if len(cs) == 0 {
		return trace.ModelCall{}, fmt.Errorf("session %q: agent %s made no model call", v.t.Session.Name, agentID)
	}
	return cs[0], nil
}

// context is what a call received after its system prompt.
func (v *view) context(c trace.ModelCall) []trace.Message { return trace.ContextOf(v.lists, c) }

// list is an agent's own message list.
func (v *view) list(agentID string) []trace.Message { return v.lists[agentID] }

// occurrences counts needle in what a call received: its system prompt, and
// each message's text and tool-call arguments.
func (v *view) occurrences(c trace.ModelCall, needle string) int {
	n := strings.Count(c.SystemPrompt, needle)
	for _, m := range v.context(c) {
		n += messageOccurrences(m, needle)
	}
	return n
}

func messageOccurrences(m trace.Message, needle string) int {
	n := strings.Count(m.Content, needle)
	for _, tc := range m.ToolCalls {
		n += strings.Count(string(tc.Args), needle)
	}
	return n
}

// receipt is the tool message that answered a task call.
func (v *view) receipt(child trace.Agent) (trace.Message, error) {
	if child.ParentID == nil || child.TaskCallID == nil {
		return trace.Message{}, fmt.Errorf("agent %s is not a child", child.ID)
	}
	for _, m := range v.list(*child.ParentID) {
		if m.Role == string(delegation.RoleTool) && m.ToolCallID != nil && *m.ToolCallID == *child.TaskCallID {
			return m, nil
		}
	}
	return trace.Message{}, fmt.Errorf("no receipt for agent %s (%s)", child.ID, child.Name)
}

// taskCall is the assistant message of the parent that holds the child's task
// call, and the call itself.
func (v *view) taskCall(child trace.Agent) (trace.Message, trace.ToolCall, error) {
	if child.ParentID == nil || child.TaskCallID == nil {
		return trace.Message{}, trace.ToolCall{}, fmt.Errorf("agent %s is not a child", child.ID)
	}
	for _, m := range v.list(*child.ParentID) {
		for _, tc := range m.ToolCalls {
			if tc.ID == *child.TaskCallID {
				return m, tc, nil
			}
		}
	}
	return trace.Message{}, trace.ToolCall{}, fmt.Errorf("no task call for agent %s", child.ID)
}

// events decodes the data of every event of a type.
func events[T any](v *view, typ delegation.EventType) []agentEvent[T] {
	var out []agentEvent[T]
	for _, ev := range v.t.Events {
		if ev.Type != typ {
			continue
		}
		var d T
		if json.Unmarshal(ev.Data, &d) == nil {
			out = append(out, agentEvent[T]{AgentID: ev.AgentID, Seq: ev.Seq, Data: d})
		}
	}
	return out
}

type agentEvent[T any] struct {
	AgentID string
	Seq     int64
	Data    T
}

// toolNames lists the names of a tool list.
func toolNames(tools []trace.ToolCost) []string {
	out := make([]string, len(tools))
	for i, t := range tools {
		out[i] = t.Name
	}
	return out
}

func hasToolNamed(tools []trace.ToolCost, name string) bool {
	for _, t := range tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

func toolTokens(tools []trace.ToolCost, name string) int {
	for _, t := range tools {
		if t.Name == name {
			return t.Tokens
		}
	}
	return 0
}

// contextTokens is a call's input without the tool definitions: its system
// prompt and messages — what the articles count as a context's size.
func contextTokens(c trace.ModelCall) int { return c.SystemTokens + c.MessageTokens }

// messageCount counts a call's messages the way the articles do: the system
// prompt is one message (even when empty), then every message of the context.
func (v *view) messageCount(c trace.ModelCall) int { return 1 + len(v.context(c)) }

// check builds a Check.
func check(claim string, ok bool, format string, args ...any) Check {
	return Check{Claim: claim, OK: ok, Detail: fmt.Sprintf(format, args...)}
}

func itoa(n int) string { return strconv.Itoa(n) }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// chars counts characters (Unicode code points), as the articles do.
func chars(s string) int { return len([]rune(s)) }

// clip shortens a text for a table cell.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// quote is a text in quotes, "(empty)" when there is none.
func quote(s string) string {
	if s == "" {
		return "(empty)"
	}
	return strconv.Quote(s)
}

func pct(part, whole int) string {
	if whole == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(part)/float64(whole))
}

func signed(n int) string {
	if n > 0 {
		return "+" + itoa(n)
	}
	return itoa(n)
}

// pctDiff is how far ours is from the article's, as a signed percentage.
func pctDiff(ours, article int) string {
	if article == 0 {
		return "–"
	}
	return fmt.Sprintf("%+.1f%%", 100*float64(ours-article)/float64(article))
}

// withinPct reports whether ours is within pct per cent of the article's.
func withinPct(ours, article int, pct float64) bool {
	if article == 0 {
		return ours == 0
	}
	d := 100 * float64(ours-article) / float64(article)
	return d >= -pct && d <= pct
}

// versusRows pairs two columns of a table, row by row: the article's
// figure and ours, named by the row's first cell.
func versusRows(tab Table, key int, ours, article, why string) []Versus {
	oi, ai := slices.Index(tab.Columns, ours), slices.Index(tab.Columns, article)
	if oi < 0 || ai < 0 {
		return nil
	}
	var out []Versus
	for _, r := range tab.Rows {
		if r[ai] == "" {
			continue
		}
		out = append(out, Versus{What: r[key], Article: r[ai], Ours: r[oi], Why: why})
	}
	return out
}

// versusArticle pairs the article's table with ours, row by row, matching
// rows by their first cell: column ours of our table against column
// article of the article's.
func versusArticle(tab Table, ours, article, why string) []Versus {
	if tab.Article == nil {
		return nil
	}
	oi, ai := slices.Index(tab.Columns, ours), slices.Index(tab.Article.Columns, article)
	if oi < 0 || ai < 0 {
		return nil
	}
	var out []Versus
	for _, ar := range tab.Article.Rows {
		v := Versus{What: ar[0], Article: ar[ai], Ours: "(not measured here)", Why: why}
		for _, r := range tab.Rows {
			if r[0] == ar[0] {
				v.Ours = r[oi]
			}
		}
		out = append(out, v)
	}
	return out
}

// versusByIndex pairs our table with the article's when their rows are the
// same cases in the same order: for each row and each named column (a
// column of both), the article's cell beside ours.
func versusByIndex(tab Table, why string, cols ...string) []Versus {
	return versusByIndexKeyed(tab, 0, why, cols...)
}

// versusByIndexKeyed is versusByIndex naming each row by its cell in
// column key (a table whose first column only numbers its rows).
func versusByIndexKeyed(tab Table, key int, why string, cols ...string) []Versus {
	if tab.Article == nil {
		return nil
	}
	var out []Versus
	for i, ar := range tab.Article.Rows {
		if i >= len(tab.Rows) {
			break
		}
		for _, col := range cols {
			oi, ai := slices.Index(tab.Columns, col), slices.Index(tab.Article.Columns, col)
			if oi < 0 || ai < 0 {
				continue
			}
			if ar[ai] == "" || tab.Rows[i][oi] == "" {
				continue
			}
			what := tab.Rows[i][key]
			if what == "" {
				what = ar[key]
			}
			out = append(out, Versus{What: what + ": " + col, Article: ar[ai], Ours: tab.Rows[i][oi], Why: why})
		}
	}
	return out
}
