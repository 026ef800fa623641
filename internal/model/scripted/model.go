package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
)

// TurnError is a script that cannot go on: it ran out, names an invocation
// it lacks, has no case that holds, or expected a summary that did not
// happen. It ends the agent that hit it; the engine turns a child's error
// into an error receipt.
type TurnError struct {
	Agent   string // the agent's name: "main" or the subagent's
	AgentID string
	Turn    string // the script path of the turn, like "script.main[2]" or "script.reporter[0][1]"
	Message string // the whole text, written for the scenario's author
}

// Error returns Message: it already names the agent and the turn.
func (e *TurnError) Error() string { return e.Message }

// Model plays a Script. Use one Model per session run: it holds each
// agent's place in its script. It is safe for concurrent use by different
// agents; one agent's calls are expected one at a time, as the engine makes
// them.
type Model struct {
	script *Script

	mu      sync.Mutex
	cursors map[string]*cursor
}

var _ delegation.Model = (*Model)(nil)

// New returns a Model that plays s. A nil s is a script with no entries:
// every agent's first turn is an error that says what to add.
func New(s *Script) *Model {
	if s == nil {
		s = &Script{}
	}
	return &Model{script: s, cursors: map[string]*cursor{}}
}

// cursor is one agent's place in its turn list.
type cursor struct {
	turns []turn
	next  int
	path  string // "script.main" or "script.reporter[0]"
	who   string // "the main agent" or `the subagent "reporter" (invocation 0)`
	err   *TurnError
}

func (c *cursor) turnPath(i int) string { return c.path + "[" + strconv.Itoa(i) + "]" }

// Generate plays the calling agent's next turn (PurposeTurn), or its summary
// (PurposeSummary): the next turn when it is a summary turn, otherwise a
// plain summary of req.Messages that uses no turn.
func (m *Model) Generate(ctx context.Context, req *delegation.Request) (*delegation.Response, error) {
	if req == nil {
		return nil, errors.New("scripted model: nil request")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("scripted model, agent %q: %w", req.Caller.Name, err)
	}
	switch req.Purpose {
	case delegation.PurposeTurn, "":
		return m.turn(ctx, req)
	case delegation.PurposeSummary:
		return m.summary(ctx, req)
	default:
		return nil, fmt.Errorf("scripted model, agent %q: unknown purpose %q", req.Caller.Name, req.Purpose)
	}
}

func (m *Model) turn(ctx context.Context, req *delegation.Request) (*delegation.Response, error) {
	m.mu.Lock()
	c := m.cursorFor(req.Caller)
	if c.err != nil {
		m.mu.Unlock()
		return nil, c.err
	}
	i := c.next
	if i >= len(c.turns) {
		m.mu.Unlock()
		return nil, c.ranOut(req.Caller, i)
	}
	t := &c.turns[i]
	if t.kind == turnSummary {
		m.mu.Unlock()
		return nil, &TurnError{
			Agent: req.Caller.Name, AgentID: req.Caller.AgentID, Turn: c.turnPath(i),
			Message: fmt.Sprintf(`%s is a "summary" turn, but the engine asked for %s's next turn: the summarization the script expected did not happen; remove the summary turn, or let the context reach agent.summarization.max_tokens before it`,
				c.turnPath(i), c.who),
		}
	}
	c.next++
	// The turn is ours now; cases, the delay and streaming need no lock,
	// so parallel children do not wait on each other.
	m.mu.Unlock()

	p := &t.play
	if t.kind == turnCases {
		p = choose(t.cases, req)
		if p == nil {
			return nil, &TurnError{
				Agent: req.Caller.Name, AgentID: req.Caller.AgentID, Turn: c.turnPath(i),
				Message: c.turnPath(i) + `: no case holds for the current context; add a case without "when" as a fallback`,
			}
		}
	}
	return m.play(ctx, req, c, i, p)
}

func (m *Model) summary(ctx context.Context, req *delegation.Request) (*delegation.Response, error) {
	m.mu.Lock()
	c := m.cursorFor(req.Caller)
	if c.err == nil && c.next < len(c.turns) && c.turns[c.next].kind == turnSummary {
		i := c.next
		c.next++
		m.mu.Unlock()
		return m.play(ctx, req, c, i, &c.turns[i].play)
	}
	m.mu.Unlock()
	// A summary needs no script: an agent whose script is broken still gets
	// one, and the broken script is reported at its next turn.
	text := AutoSummary(req.Messages)
	return &delegation.Response{Content: text}, nil
}

// play waits out the delay (streaming the content across it) and builds the
// response, generating the ids the script left out.
func (m *Model) play(ctx context.Context, req *delegation.Request, c *cursor, i int, p *play) (*delegation.Response, error) {
	// An instant turn is not streamed: there is nothing to watch arrive.
	if p.delay > 0 {
		if err := think(ctx, p.delay, p.content, req.Stream); err != nil {
			return nil, fmt.Errorf("%s: %s was stopped while it was thinking (delay_ms %d): %w",
				c.turnPath(i), c.who, p.delay.Milliseconds(), err)
		}
	}
	resp := &delegation.Response{Content: p.content}
	if len(p.toolCalls) > 0 {
		resp.ToolCalls = make([]delegation.ToolCall, len(p.toolCalls))
		for j := range p.toolCalls {
			tc := &p.toolCalls[j]
			id := tc.id
			if id == "" {
				// The agent id makes the id unique in the session, the turn
				// index and position make it unique in the agent.
				id = "call_" + req.Caller.AgentID + "_" + strconv.Itoa(i) + "_" + strconv.Itoa(j)
			}
			// Copy the args: the engine owns what it is given, and the
			// script is shared by every run.
			resp.ToolCalls[j] = delegation.ToolCall{ID: id, Name: tc.name, Args: append(json.RawMessage(nil), tc.args...)}
		}
	}
	return resp, nil
}

// cursorFor returns the caller's cursor, creating it on the agent's first
// call. m.mu must be held.
func (m *Model) cursorFor(caller delegation.Caller) *cursor {
	key := caller.AgentID
	if key == "" {
		// Without an id, name and invocation still tell agents apart.
		key = "\x00" + caller.Name + "#" + strconv.Itoa(caller.Invocation)
	}
	if c, ok := m.cursors[key]; ok {
		return c
	}
	c := m.resolve(caller)
	m.cursors[key] = c
	return c
}

// resolve finds the turn list the caller plays.
func (m *Model) resolve(caller delegation.Caller) *cursor {
	s := m.script
	fail := func(turn, format string, args ...any) *cursor {
		return &cursor{err: &TurnError{Agent: caller.Name, AgentID: caller.AgentID, Turn: turn, Message: fmt.Sprintf(format, args...)}}
	}
	if caller.Name == "main" {
		if !s.hasMain {
			return fail("script.main", `script has no entry for the main agent; add "main": [{"content": "…"}]`)
		}
		return &cursor{turns: s.main, path: "script.main", who: "the main agent"}
	}
	name := caller.Name
	lists, ok := s.subs[name]
	if !ok {
		return fail("script."+name, `script has no entry for subagent %q (invoked %s); add %q: [[{"content": "…"}]]`,
			name, plural(caller.Invocation+1, "time"), name)
	}
	path := "script." + name + "[" + strconv.Itoa(caller.Invocation) + "]"
	if caller.Invocation < 0 {
		return fail(path, "script.%s: the subagent %q has invocation number %d, which cannot be", name, name, caller.Invocation)
	}
	if caller.Invocation >= len(lists) {
		return fail(path, "script.%s has no invocation %d: the subagent %q was started %s but the script has %s; add one list of turns per invocation",
			name, caller.Invocation, name, plural(caller.Invocation+1, "time"), plural(len(lists), "list")+" of turns")
	}
	return &cursor{
		turns: lists[caller.Invocation],
		path:  path,
		who:   fmt.Sprintf("the subagent %q (invocation %d)", name, caller.Invocation),
	}
}

func (c *cursor) ranOut(caller delegation.Caller, i int) *TurnError {
	e := &TurnError{Agent: caller.Name, AgentID: caller.AgentID, Turn: c.turnPath(i)}
	if caller.Name == "main" {
		e.Message = fmt.Sprintf(`script.main ran out: the main agent asked for turn %d but the script has %s; add a turn with "content" to end the run`,
			i+1, plural(len(c.turns), "turn"))
	} else {
		e.Message = fmt.Sprintf(`%s ran out: %s asked for turn %d but its list has %s; add a turn with "content" to end its run`,
			c.path, c.who, i+1, plural(len(c.turns), "turn"))
	}
	return e
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// choose returns the first case that holds for the request's context.
func choose(cases []scriptCase, req *delegation.Request) *play {
	ctx := contextText{req: req}
	for i := range cases {
		if cases[i].holds(&ctx) {
			return &cases[i].play
		}
	}
	return nil
}

// contextText is what the model would receive now, searched piece by piece:
// joining the pieces would let a needle match across two of them.
type contextText struct {
	req *delegation.Request
}

func (c *contextText) has(needle string) bool {
	if strings.Contains(c.req.System, needle) {
		return true
	}
	for _, msg := range c.req.Messages {
		if msg == nil {
			continue
		}
		if strings.Contains(msg.Content, needle) {
			return true
		}
		for _, tc := range msg.ToolCalls {
			if strings.Contains(tc.Name, needle) || argsContain(tc.Args, needle) {
				return true
			}
		}
	}
	return false
}

// argsContain searches the args' JSON text and, when the text has escapes,
// its decoded strings too: an order number written with a newline before it
// is "\n" in the JSON, and "<" may be "\u003c".
func argsContain(args json.RawMessage, needle string) bool {
	text := string(args)
	if strings.Contains(text, needle) {
		return true
	}
	if !strings.Contains(text, `\`) {
		return false
	}
	var v any
	if json.Unmarshal(args, &v) != nil {
		return false
	}
	return valueContains(v, needle)
}

func valueContains(v any, needle string) bool {
	switch v := v.(type) {
	case string:
		return strings.Contains(v, needle)
	case map[string]any:
		for k, x := range v {
			if strings.Contains(k, needle) || valueContains(x, needle) {
				return true
			}
		}
	case []any:
		for _, x := range v {
			if valueContains(x, needle) {
				return true
			}
		}
	}
	return false
}

// minTick is the shortest pause between two streamed pieces: a long text
// with a short delay goes out several words at a time rather than one word
// per timer tick the scheduler cannot keep.
const minTick = 10 * time.Millisecond

// think waits d, handing content to stream (when set) in word-sized pieces
// spread across the wait, and returns ctx's error if ctx ends first.
func think(ctx context.Context, d time.Duration, content string, stream func(string)) error {
	if stream == nil || content == "" {
		if d <= 0 {
			return nil
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		}
	}
	n := countWords(content)
	ticks := n
	if d <= 0 {
		ticks = 1
	} else if most := int(d / minTick); ticks > most {
		ticks = max(most, 1)
	}
	var t *time.Timer
	start := time.Now()
	pos, sent := 0, 0
	for k := 1; k <= ticks; k++ {
		if d > 0 {
			due := time.Duration(int64(d) * int64(k) / int64(ticks))
			wait := due - time.Since(start)
			if t == nil {
				t = time.NewTimer(wait)
				defer t.Stop()
			} else {
				t.Reset(wait)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
			}
		}
		for upto := n * k / ticks; sent < upto; sent++ {
			end := wordEnd(content, pos)
			stream(content[pos:end])
			pos = end
		}
	}
	return nil
}

// wordEnd returns where the piece starting at pos ends: after the next word
// and the white space that follows it, so the pieces join back to the text.
func wordEnd(s string, pos int) int {
	i := pos
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	for i < len(s) && !isSpace(s[i]) {
		i++
	}
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

func countWords(s string) int {
	n := 0
	for pos := 0; pos < len(s); pos = wordEnd(s, pos) {
		n++
	}
	return n
}

func isSpace(b byte) bool { return b == ' ' || b == '\n' || b == '\t' || b == '\r' }
