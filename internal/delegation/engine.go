package delegation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Counter counts tokens with the session's tokenizer. internal/tokens
// implements it.
type Counter interface {
	Count(text string) int
}

// Config is what one session run needs.
type Config struct {
	SessionID string
	Name      string
	Team      *Team
	Model     Model
	Counter   Counter
	Tokenizer string // the Counter's name, recorded in session.started
	Sink      Sink
	Files     map[string]string // the main agent's files at the start
	Now       func() time.Time  // nil means time.Now
	Logger    *slog.Logger      // nil means slog.Default()
	// Prices finds a model's price for agents the team gives none; nil
	// prices nothing but what the team prices.
	Prices PriceTable
}

// Session statuses (formats.md §2).
const (
	StatusRunning     = "running"
	StatusDone        = "done"
	StatusFailed      = "failed"
	StatusInterrupted = "interrupted"
)

// Statuses are a session's (and an agent's) statuses, in a list's order.
func Statuses() []string {
	return []string{StatusRunning, StatusDone, StatusFailed, StatusInterrupted}
}

// Result is how a session ended.
type Result struct {
	Status string // done, failed, or interrupted when its context was cancelled
	Answer string // the main agent's final text
	Err    error  // why it failed
	Files  map[string]string
}

// Engine runs one session: the main agent and the children it delegates to.
type Engine struct {
	cfg  Config
	team *Team
	now  func() time.Time
	log  *slog.Logger

	evMu sync.Mutex // orders events: seq and the Sink see them one at a time
	seq  int64

	idMu        sync.Mutex
	children    int
	invocations map[string]int

	costMu    sync.Mutex
	toolCosts map[*tool]int

	// prefixes holds every request made, for each call's cached prefix.
	prefixes PrefixIndex
}

// New prepares a session run.
func New(cfg Config) *Engine {
	e := &Engine{cfg: cfg, team: cfg.Team, now: cfg.Now, log: cfg.Logger,
		invocations: map[string]int{}, toolCosts: map[*tool]int{}}
	if e.now == nil {
		e.now = time.Now
	}
	if e.log == nil {
		e.log = slog.Default()
	}
	if e.cfg.Sink == nil {
		e.cfg.Sink = SinkFunc(func(Event) {})
	}
	return e
}

// agent is one running agent: its message list (append-only), its effective
// history as ranges, and its workspace.
type agent struct {
	info   AgentInfo
	parent *agent
	model  string

	// prompt is the agent's own system prompt, the one a fork inherits;
	// system is what its model calls receive: prompt and the sections its
	// tools bring (systemPrompt).
	prompt       string
	system       string
	systemTokens int
	tools        []*tool
	toolDefs     []ToolDef // what every model call of this agent receives
	toolCosts    []ToolCost
	toolTokens   int
	structured   *structuredTool
	maxSteps     int
	summary      Summarization // its own threshold (§7)
	timeout      time.Duration
	canDelegate  bool // has the task tool
	isFork       bool
	// inherited is the history a fork child started from (ranges of its
	// ancestors' lists) and inheritedLen its length in messages: the head of
	// the child's raw message list, as deepagents copies it into the fork's
	// state.
	inherited    []Range
	inheritedLen int

	msgs   []*Message
	prefix []int // prefix[i] is the tokens of msgs[:i]
	// keys are msgs' cache keys; toolsKey and systemKey those of its tools
	// and system prompt; mark is where its latest request ended among the
	// session's requests (prefix.go).
	keys                []PrefixKey
	toolsKey, systemKey PrefixKey
	mark                *PrefixMark
	// price is what its tokens cost; nil: not priced.
	price *Price
	// pricing is its spec's own price, if any.
	pricing *Price
	// history is the effective history every model call receives after the
	// system prompt: ranges of this agent's list and, for a fork child, of
	// its parent's. Summarization replaces its head.
	history   []Range
	summaries int // how many times its history was summarized

	ws    *workspace
	calls int // model calls, summaries included: the calls' indexes
	turns int // model calls for turns: what max_steps caps

	structuredAnswer string
	structuredFails  int
}

// Run runs the session to its end. A child's failure stays in the child; the
// session fails only when the main agent does.
func (e *Engine) Run(ctx context.Context, prompt string) *Result {
	files := e.cfg.Files
	if files == nil {
		files = map[string]string{}
	}
	e.emit("", EventSessionStarted, SessionStarted{SessionID: e.cfg.SessionID, Name: e.cfg.Name,
		Prompt: prompt, Tokenizer: e.cfg.Tokenizer, Files: files})

	main := &agent{
		info:        AgentInfo{ID: "main", Name: "main"},
		model:       e.team.Main.Model,
		prompt:      e.team.Main.SystemPrompt,
		tools:       e.team.mainTools,
		maxSteps:    e.team.Main.MaxSteps,
		summary:     e.team.Main.Summarization,
		canDelegate: hasTool(e.team.mainTools, TaskToolName),
		ws:          newWorkspace(files),
		prefix:      []int{0},
		pricing:     e.team.Main.Pricing,
	}
	e.startAgent(main)
	opening := &Message{Role: RoleUser, Content: prompt, Kind: KindPrompt}
	e.evictHumanMessage(main, opening)
	e.appendMessage(main, opening)

	err := e.runAgentSafe(ctx, main)
	res := &Result{Status: StatusDone, Answer: receiptText(main), Files: main.ws.snapshot()}
	fin := AgentFinished{Status: StatusDone, Steps: main.turns, Receipt: res.Answer}
	if err != nil {
		res.Status, res.Err = StatusFailed, err
		fin.Status, fin.Error, fin.Code = StatusFailed, err.Error(), FinishCode(err)
		// Stopped from outside, rather than failed on its own.
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			res.Status, res.Err = StatusInterrupted, context.Cause(ctx)
			fin.Error, fin.StoppedBy = res.Err.Error(), StopReason(ctx) // "": a cause of its own, which Error says
		}
	}
	e.emit(main.info.ID, EventAgentFinished, fin)
	sf := SessionFinished{Status: res.Status, Answer: res.Answer, Files: res.Files, StoppedBy: fin.StoppedBy}
	if res.Err != nil {
		sf.Error = res.Err.Error()
	}
	e.emit("", EventSessionFinished, sf)
	return res
}

func hasTool(tools []*tool, name string) bool {
	for _, t := range tools {
		if t.def.Name == name {
			return true
		}
	}
	return false
}

// startAgent counts the agent's fixed costs and announces it.
func (e *Engine) startAgent(a *agent) {
	a.system = systemPrompt(a.prompt, a.tools)
	a.systemTokens = e.count(a.system)
	a.toolDefs = defs(a.tools)
	a.toolCosts = make([]ToolCost, len(a.tools))
	for i, t := range a.tools {
		c := e.toolCost(t)
		a.toolCosts[i] = ToolCost{Name: t.def.Name, Tokens: c}
		a.toolTokens += c
	}
	a.toolsKey, a.systemKey = ToolsKey(a.toolDefs), SystemKey(a.system)
	started := AgentStarted{Agent: a.info, SystemPrompt: a.system,
		SystemTokens: a.systemTokens, Tools: a.toolCosts, MaxSteps: a.maxSteps, Model: a.model}
	if d, ok := e.cfg.Model.(Describer); ok {
		started.Model, started.Endpoint = d.Describe(Caller{AgentID: a.info.ID, Name: a.info.Name, Invocation: a.info.Invocation}, a.model)
	}
	a.price = e.priceOf(a, started.Model)
	started.Price = a.price
	e.emit(a.info.ID, EventAgentStarted, started)
	if len(a.ws.todos) > 0 {
		// A fork starts with its parent's todos.
		e.emit(a.info.ID, EventTodosChanged, TodosChanged{Todos: slices.Clone(a.ws.todos)})
	}
}

// priceOf is what an agent's tokens cost: its spec's own price, the team's,
// or the price table's for its model; nil when none is known.
func (e *Engine) priceOf(a *agent, model string) *Price {
	if a.pricing != nil {
		p := *a.pricing
		return &p
	}
	if p := e.team.Main.Pricing; p != nil {
		q := *p
		return &q
	}
	if e.cfg.Prices != nil && model != "" {
		if p, ok := e.cfg.Prices(model); ok {
			return &p
		}
	}
	return nil
}

// emitTodos announces an agent's todo list when a tool call changed it.
func (e *Engine) emitTodos(a *agent, st *stage) {
	if st != nil && st.setTodo {
		todos := slices.Clone(st.todos)
		if todos == nil {
			todos = []Todo{}
		}
		e.emit(a.info.ID, EventTodosChanged, TodosChanged{Todos: todos})
	}
}

func (e *Engine) count(s string) int { return countText(e.cfg.Counter, s) }

// toolCost is a tool definition's tokens: its ToolJSON, counted with the
// session's tokenizer.
func (e *Engine) toolCost(t *tool) int {
	e.costMu.Lock()
	defer e.costMu.Unlock()
	if c, ok := e.toolCosts[t]; ok {
		return c
	}
	c := ToolTokens(e.cfg.Counter, t.def)
	e.toolCosts[t] = c
	return c
}

// ToolTokens is a tool definition's cost: its ToolJSON, counted with the
// session's tokenizer (§11).
func ToolTokens(counter Counter, def ToolDef) int {
	return countText(counter, ToolJSON(def))
}

func (e *Engine) messageTokens(m *Message) int { return MessageTokens(e.cfg.Counter, m) }

// MessageTokens counts what a model reads of a message (§11): its text and
// each tool call's name and arguments.
func MessageTokens(counter Counter, m *Message) int {
	n := countText(counter, m.Content)
	for _, c := range m.ToolCalls {
		n += countText(counter, c.Name) + countText(counter, string(c.Args))
	}
	return n
}

func countText(counter Counter, s string) int {
	if s == "" || counter == nil {
		return 0
	}
	return counter.Count(s)
}

// appendMessage adds m to a's list and to the end of its history.
func (e *Engine) appendMessage(a *agent, m *Message) *Message {
	idx := len(a.msgs)
	m.ID = a.info.ID + "." + strconv.Itoa(idx)
	m.AgentID = a.info.ID
	m.Tokens = e.messageTokens(m)
	a.msgs = append(a.msgs, m)
	a.keys = append(a.keys, MessageKey(m))
	a.prefix = append(a.prefix, a.prefix[idx]+m.Tokens)
	if n := len(a.history); n > 0 && a.history[n-1].AgentID == a.info.ID && a.history[n-1].To == idx {
		a.history[n-1].To++
	} else {
		a.history = append(a.history, Range{AgentID: a.info.ID, From: idx, To: idx + 1})
	}
	e.emit(a.info.ID, EventMessageAdded, MessageAdded{Index: idx, Message: m})
	return m
}

// lookup finds the agent whose list a range names: the agent itself or one
// of its ancestors.
func (a *agent) lookup(id string) *agent {
	for x := a; x != nil; x = x.parent {
		if x.info.ID == id {
			return x
		}
	}
	return nil
}

// tokensOf sums the tokens of ranges, and of the part not a's own.
func (a *agent) tokensOf(rs []Range) (total, inherited int) {
	for _, r := range rs {
		owner := a.lookup(r.AgentID)
		n := owner.prefix[r.To] - owner.prefix[r.From]
		total += n
		if owner != a {
			inherited += n
		}
	}
	return total, inherited
}

// resolve returns the messages ranges name. A single range is a sub-slice of
// its list, never a copy.
func (a *agent) resolve(rs []Range) []*Message {
	if len(rs) == 1 {
		owner := a.lookup(rs[0].AgentID)
		return owner.msgs[rs[0].From:rs[0].To:rs[0].To]
	}
	n := 0
	for _, r := range rs {
		n += r.Len()
	}
	out := make([]*Message, 0, n)
	for _, r := range rs {
		out = append(out, a.lookup(r.AgentID).msgs[r.From:r.To]...)
	}
	return out
}

// errStepLimit ends an agent that used up its model calls.
type errStepLimit struct{ max int }

func (e errStepLimit) Error() string {
	return fmt.Sprintf("it reached its step limit of %d model calls before giving a final answer", e.max)
}

// FinishCode is the code of an agent's failure, "" for one of no rule of
// the engine's.
func FinishCode(err error) string {
	switch {
	case isStepLimit(err): // its own, not a child's that failed it (compat deepagents)
		return FinishStepLimit
	case errors.Is(err, context.Canceled):
		return FinishCancelled
	}
	return ""
}

func isStepLimit(err error) bool { _, ok := err.(errStepLimit); return ok }

// runAgentSafe runs an agent's loop; a panic becomes a failed agent, with its
// stack logged, never a crash past the agent.
func (e *Engine) runAgentSafe(ctx context.Context, a *agent) (err error) {
	defer func() {
		if r := recover(); r != nil {
			e.log.Error("agent panicked", "session", e.cfg.SessionID, "agent", a.info.ID, "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("internal error: %v", r)
		}
	}()
	return e.runAgent(ctx, a)
}

// runAgent is the agent loop: call the model, run the tools it asks for,
// until it answers without tool calls, gives its structured answer, or fails.
// Only turns count against max_steps: a summary call is made inside the
// model step, as deepagents' summarization middleware wraps the model call
// (middleware/summarization.py, wrap_model_call), and uses no graph step.
func (e *Engine) runAgent(ctx context.Context, a *agent) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if a.turns >= a.maxSteps {
			return errStepLimit{a.maxSteps}
		}
		if err := e.maybeSummarize(ctx, a); err != nil {
			return err
		}
		resp, out, err := e.callModel(ctx, a, PurposeTurn, a.history)
		if err != nil {
			return err
		}
		if len(resp.ToolCalls) == 0 {
			// An answer without tool calls ends the agent, a child with a
			// response_format too: its call is required (tool_choice), but
			// an endpoint may ignore that, and then its text is the receipt
			// (§10). langchain's createAgent returns a response without the
			// structured tool's call as it is, and the agent ends with no
			// structuredResponse (AgentNode, "if there were not structured
			// tool calls, we can return the response"); deepagents then
			// sends the last text back (deepagentsjs
			// src/middleware/subagents.ts:447-467).
			return nil
		}
		if done, err := e.runTools(ctx, a, out); done || err != nil {
			return err
		}
	}
}

// callModel makes one model call with the given context and adds its answer
// to the agent's list.
func (e *Engine) callModel(ctx context.Context, a *agent, purpose Purpose, context []Range) (*Response, *Message, error) {
	idx := a.calls
	a.calls++
	if purpose == PurposeTurn {
		a.turns++
	}
	msgTokens, inherited := a.tokensOf(context)
	call := ModelCall{
		ID: a.info.ID + ".c" + strconv.Itoa(idx), AgentID: a.info.ID, Index: idx, Purpose: purpose,
		SystemPrompt: a.system, SystemTokens: a.systemTokens,
		Context: append([]Range(nil), context...), Tools: a.toolCosts, ToolTokens: a.toolTokens,
		MessageTokens: msgTokens, InheritedTokens: inherited,
		InputTokens: a.systemTokens + a.toolTokens + msgTokens,
	}
	call.CachedPrefixTokens = e.cachedPrefix(a, call)
	e.emit(a.info.ID, EventModelStarted, ModelStarted{Call: call})
	req := &Request{
		Caller:  Caller{AgentID: a.info.ID, Name: a.info.Name, Invocation: a.info.Invocation},
		Purpose: purpose, Model: a.model, System: a.system,
		Messages: a.resolve(context), Tools: a.toolDefs,
		Stream: func(delta string) {
			e.emitLive(a.info.ID, EventModelDelta, ModelDelta{ModelCallID: call.ID, Text: delta})
		},
		Retry: func(r ModelRetry) {
			r.ModelCallID = call.ID
			e.emitLive(a.info.ID, EventModelRetry, r)
		},
	}
	if a.structured != nil && purpose == PurposeTurn {
		req.ResponseFormat = a.structured.def.Parameters
		req.ToolChoice = ToolChoiceRequired
	}
	start := e.now()
	resp, err := e.cfg.Model.Generate(ctx, req)
	fin := ModelFinished{ModelCallID: call.ID, DurationMS: e.now().Sub(start).Milliseconds()}
	if err == nil && resp == nil {
		err = errors.New("the model returned no response")
	}
	if err != nil {
		fin.Error = err.Error()
		if cause := stopCause(ctx); cause != nil {
			// Stopped from outside: the call says so, not what the
			// cancellation made of it ("context canceled").
			fin.Error, fin.StoppedBy = cause.Error(), StopReason(ctx)
		}
		e.emit(a.info.ID, EventModelFinished, fin)
		return nil, nil, fmt.Errorf("model error: %w", err)
	}
	fin.Usage, fin.Response = resp.Usage, resp.Meta
	var out *Message
	if purpose == PurposeTurn {
		out = &Message{Role: RoleAssistant, Content: resp.Content, Reasoning: resp.Reasoning, ToolCalls: e.withIDs(a, idx, resp.ToolCalls)}
		e.appendMessage(a, out)
		fin.OutputMessageID, fin.OutputTokens = out.ID, out.Tokens
	} else {
		fin.OutputTokens = e.count(resp.Content) // the summary, which the model wrote
	}
	if a.price != nil {
		c := a.price.CallCost(call, fin)
		fin.Cost = &c
	}
	e.emit(a.info.ID, EventModelFinished, fin)
	return resp, out, nil
}

// cachedPrefix is the tokens of the call's input that a request made
// earlier in the session began with too (prefix.go). It walks from the
// agent's previous request or, for a child's first, its parent's latest,
// so it costs what the call adds.
func (e *Engine) cachedPrefix(a *agent, call ModelCall) int {
	var parent *PrefixMark
	if a.parent != nil {
		parent = a.parent.mark
	}
	cached, mark := e.prefixes.Add(PrefixRequest{Tools: a.toolsKey, ToolTokens: a.toolTokens, System: a.systemKey,
		SystemTokens: a.systemTokens, Context: call.Context, Tokens: call.InputTokens,
		Message: func(agentID string, idx int) (PrefixKey, int) {
			owner := a.lookup(agentID)
			return owner.keys[idx], owner.msgs[idx].Tokens
		}}, a.mark, parent)
	a.mark = mark
	return cached
}

// withIDs gives every tool call an id, for the result to refer to.
func (e *Engine) withIDs(a *agent, step int, calls []ToolCall) []ToolCall {
	for i := range calls {
		if calls[i].ID == "" {
			calls[i].ID = fmt.Sprintf("call_%s_%d_%d", a.info.ID, step, i)
		}
		if len(calls[i].Args) == 0 {
			calls[i].Args = json.RawMessage("{}")
		}
	}
	return calls
}

// pending is one tool call's outcome, applied and appended in call order
// once every call of the message is done.
type pending struct {
	result *Message
	staged *stage // what a non-task call changed, not yet applied
	child  *agent
	done   chan struct{}
}

// runTools runs the tool calls of one assistant message (delegation.md §8).
// Every call reads the state as it was before the message: the other tools
// run with their changes staged, and task calls start children from that
// same state, concurrently (capped unless compat is "deepagents"). Once all
// are done, their changes are applied and their results appended in call
// order, not finish order. It reports whether the agent gave its structured
// answer.
func (e *Engine) runTools(ctx context.Context, a *agent, msg *Message) (bool, error) {
	calls := msg.ToolCalls
	outs := make([]pending, len(calls))
	// Under compat "deepagents" the first child to fail cancels its
	// siblings and fails this agent, as an exception raised in one task of a
	// LangGraph step fails the step and the run (**Better**, delegation.md
	// §9: here failure stays in the child).
	childCtx, cancelChildren := ctx, context.CancelCauseFunc(func(error) {})
	if slices.ContainsFunc(calls, func(c ToolCall) bool { return c.Name == TaskToolName }) {
		childCtx, cancelChildren = context.WithCancelCause(ctx)
		defer cancelChildren(nil)
	}
	fail := &stepFailure{cancel: cancelChildren}
	var wg sync.WaitGroup
	e.startChildren(childCtx, a, calls, outs, fail, &wg)
	done, structuredCalls := e.runOwnTools(ctx, a, calls, outs)
	wg.Wait()

	if fail.by != nil {
		// deepagents adds nothing of the failed step to the parent: no
		// result of any of its calls, no state.
		for i := range outs {
			if p := &outs[i]; p.child != nil {
				e.emit(a.info.ID, EventDelegationFinished, DelegationFinished{ToolCallID: calls[i].ID, ChildID: p.child.info.ID,
					IsError: true, Returned: []string{}, HeldBack: []string{"receipt", "messages", "files"}})
			}
		}
		return false, fmt.Errorf("subagent '%s' failed: %v; under compat 'deepagents' a child's failure fails its parent", fail.by.info.Name, fail.err)
	}
	e.applyOutcomes(a, calls, outs)
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if a.structured != nil && !done && structuredCalls > 0 && a.structuredFails >= structuredAttempts {
		return false, fmt.Errorf("it gave no valid structured answer after %d attempts: it must call %s once, with arguments that match its schema",
			structuredAttempts, a.structured.def.Name)
	}
	return done, nil
}

// stepFailure is the first child of a step to fail, under compat
// "deepagents", and how its siblings are cancelled.
type stepFailure struct {
	mu     sync.Mutex
	by     *agent
	err    error
	cancel context.CancelCauseFunc
}

// startChildren plans the step's task calls and starts their children,
// concurrently (capped by max_concurrency). Children are planned in call
// order, so ids and invocation numbers are deterministic, and start from
// the workspace before this message changes it.
func (e *Engine) startChildren(ctx context.Context, a *agent, calls []ToolCall, outs []pending, fail *stepFailure, wg *sync.WaitGroup) {
	compat := e.team.Main.Compat == CompatDeepagents
	limit := e.team.Main.MaxConcurrency
	if limit <= 0 {
		limit = len(calls) // no cap: deepagents runs every call of the step at once
	}
	sem := make(chan struct{}, max(limit, 1))
	for i, c := range calls {
		if c.Name != TaskToolName || !a.canDelegate {
			continue
		}
		e.emit(a.info.ID, EventToolStarted, ToolStarted{ToolCallID: c.ID, Name: c.Name, Args: c.Args})
		child, res := e.planChild(a, c)
		if child == nil {
			outs[i].result = res
			e.emit(a.info.ID, EventToolFinished, ToolFinished{ToolCallID: c.ID, Name: c.Name, IsError: res.IsError})
			continue
		}
		outs[i].child, outs[i].done = child, make(chan struct{})
		wg.Add(1)
		go func(p *pending, call ToolCall) {
			defer wg.Done()
			defer close(p.done)
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
			}
			start := e.now()
			var cerr error
			p.result, cerr = e.runChild(ctx, p.child)
			if compat && cerr != nil {
				fail.mu.Lock()
				if fail.by == nil && context.Cause(ctx) == nil {
					fail.by, fail.err = p.child, cerr
					fail.cancel(fmt.Errorf("its sibling '%s' failed", p.child.info.Name))
				}
				fail.mu.Unlock()
			}
			e.emit(a.info.ID, EventToolFinished, ToolFinished{ToolCallID: call.ID, Name: call.Name,
				IsError: p.result.IsError, DurationMS: e.now().Sub(start).Milliseconds()})
		}(&outs[i], c)
	}
}

// runOwnTools runs the step's other tool calls, in order, each with its
// changes staged. It reports whether the agent gave its structured answer,
// and how many structured calls the message made.
func (e *Engine) runOwnTools(ctx context.Context, a *agent, calls []ToolCall, outs []pending) (done bool, structuredCalls int) {
	if a.structured != nil {
		for _, c := range calls {
			if c.Name == a.structured.def.Name {
				structuredCalls++
			}
		}
	}
	for i, c := range calls {
		if c.Name == TaskToolName && a.canDelegate {
			continue
		}
		e.emit(a.info.ID, EventToolStarted, ToolStarted{ToolCallID: c.ID, Name: c.Name, Args: c.Args})
		start := e.now()
		var content string
		var isErr bool
		if structuredCalls > 1 && c.Name == a.structured.def.Name {
			content, isErr = multipleStructured(a.structured.def.Name, structuredCalls), true
			a.structuredFails++
		} else {
			a.ws.begin()
			content, isErr = e.runTool(ctx, a, c)
			outs[i].staged = a.ws.end()
		}
		if a.structured != nil && c.Name == a.structured.def.Name && !isErr {
			done = true
		}
		outs[i].result = &Message{Role: RoleTool, Content: content, ToolCallID: c.ID, IsError: isErr}
		e.emit(a.info.ID, EventToolFinished, ToolFinished{ToolCallID: c.ID, Name: c.Name, IsError: isErr,
			DurationMS: e.now().Sub(start).Milliseconds()})
	}
	return done, structuredCalls
}

// applyOutcomes applies the step's changes and appends its results, in
// call order, not finish order: a child's files come back as its parent's
// merge rule says, with its receipt.
func (e *Engine) applyOutcomes(a *agent, calls []ToolCall, outs []pending) {
	for i := range outs {
		p := &outs[i]
		if p.child == nil {
			a.ws.apply(p.staged)
			e.emitFileChanges(a, "")
			e.emitTodos(a, p.staged)
			e.evictToolResult(a, calls[i].Name, p.result)
			e.appendMessage(a, p.result)
			continue
		}
		filesBack := mergeFiles(a.ws, p.child.ws, e.team.Main.FilesMerge)
		e.emitFileChanges(a, p.child.info.ID)
		e.evictToolResult(a, calls[i].Name, p.result)
		receipt := e.appendMessage(a, p.result)
		returned, held := returnedState(p.child, filesBack)
		e.emit(a.info.ID, EventDelegationFinished, DelegationFinished{ToolCallID: calls[i].ID, ChildID: p.child.info.ID,
			ReceiptMessageID: receipt.ID, IsError: receipt.IsError, Returned: returned, HeldBack: held})
	}
}

// multipleStructured is the result of each structured call when a message
// holds several: deepagents (langchain createAgent's ToolStrategy) raises
// MultipleStructuredOutputsError and, handling it, sends the error back for
// the model to try again.
func multipleStructured(name string, n int) string {
	return fmt.Sprintf("Invalid answer: %d calls of %s in one message, but exactly one structured answer is expected. Call %s once.", n, name, name)
}

func (e *Engine) emitFileChanges(a *agent, from string) {
	if ch := a.ws.takeRecent(); len(ch) > 0 {
		e.emit(a.info.ID, EventFilesChanged, FilesChanged{From: from, Changes: ch})
	}
}

// runTool runs one non-task tool call; failures become error results.
func (e *Engine) runTool(ctx context.Context, a *agent, c ToolCall) (string, bool) {
	if a.structured != nil && c.Name == a.structured.def.Name {
		answer, err := a.structured.check(c.Args)
		if err != nil {
			a.structuredFails++
			return err.Error(), true
		}
		a.structuredAnswer = answer
		return "Your structured answer was recorded; your task is complete.", false
	}
	var t *tool
	for _, x := range a.tools {
		if x.def.Name == c.Name && x.run != nil {
			t = x
		}
	}
	if t == nil {
		names := make([]string, len(a.tools))
		for i, x := range a.tools {
			names[i] = x.def.Name
		}
		return fmt.Sprintf("Unknown tool '%s'. Your tools are: %s.", c.Name, strings.Join(names, ", ")), true
	}
	out, err := t.run(ctx, a.ws, c.Args)
	if err != nil {
		return err.Error(), true
	}
	return out, false
}

// planChild handles a task call up to the child's start (delegation.md §3):
// a fork child is refused, an unknown type gets the list of allowed ones,
// otherwise the child is built with the context of its mode. It returns the
// child, or the tool result when there is none.
func (e *Engine) planChild(a *agent, c ToolCall) (*agent, *Message) {
	if a.isFork {
		// deepagentsjs checks the fork marker before anything else
		// (src/middleware/subagents.ts:848).
		var args taskArgs
		_ = json.Unmarshal(c.Args, &args)
		e.emit(a.info.ID, EventDelegationRefused, DelegationRefused{ToolCallID: c.ID, Reason: RefusedNested,
			SubagentType: args.SubagentType, Message: NestedRefusal})
		return nil, &Message{Role: RoleTool, Content: NestedRefusal, ToolCallID: c.ID, Kind: KindRefusal}
	}
	args, err := parseTaskArgs(c.Args, e.team.Main.Compat == CompatDeepagents)
	if err != nil {
		return nil, &Message{Role: RoleTool, Content: err.Error(), ToolCallID: c.ID, IsError: true}
	}
	sub := e.team.Subagent(args.SubagentType)
	if sub == nil {
		text := UnknownTypeMessage(args.SubagentType, e.team.Names())
		e.emit(a.info.ID, EventDelegationRefused, DelegationRefused{ToolCallID: c.ID, Reason: RefusedUnknownType,
			SubagentType: args.SubagentType, Message: text})
		return nil, &Message{Role: RoleTool, Content: text, ToolCallID: c.ID, Kind: KindRefusal}
	}

	var start childStart
	if sub.Mode == ModeFork {
		start = forkContext(a, e.team, sub, args.Description)
	} else {
		start = isolatedContext(e.team, sub, args.Description)
	}
	e.idMu.Lock()
	e.children++
	id := "a" + strconv.Itoa(e.children)
	inv := e.invocations[sub.Name]
	e.invocations[sub.Name]++
	e.idMu.Unlock()

	model := sub.Model
	if model == "" {
		model = a.model
	}
	child := &agent{
		info: AgentInfo{ID: id, Name: sub.Name, ParentID: a.info.ID, Mode: sub.Mode,
			TaskCallID: c.ID, Invocation: inv},
		parent: a, model: model,
		prompt: start.system, tools: start.tools, structured: sub.structured,
		maxSteps: sub.MaxSteps, summary: sub.Summarization, timeout: sub.Timeout,
		canDelegate: hasTool(start.tools, TaskToolName), isFork: sub.Mode == ModeFork,
		history: start.inherited, inherited: start.inherited, prefix: []int{0}, pricing: sub.Pricing,
		// A fork inherits the parent's todos; an isolated child does not
		// (deepagentsjs FORK_EXCLUDED_STATE_KEYS leaves todos in,
		// src/middleware/subagents.ts:103; EXCLUDED_STATE_KEYS at :77 and
		// Python's _EXCLUDED_STATE_KEYS take them out).
		ws: a.ws.fork(sub.Mode == ModeFork),
	}
	for _, r := range start.inherited {
		child.inheritedLen += r.Len()
	}
	e.emit(a.info.ID, EventDelegationStarted, DelegationStarted{ToolCallID: c.ID, ChildID: id,
		SubagentType: sub.Name, Mode: sub.Mode, Description: args.Description})
	// Announced here, in call order, so the tree is the same on every run;
	// its model.started shows when it actually runs.
	e.startAgent(child)
	opening := start.opening
	e.evictHumanMessage(child, &opening)
	e.appendMessage(child, &opening)
	return child, nil
}

// runChild runs a child to its end and returns its receipt (delegation.md
// §5, §9): its report, or an error receipt when it failed, with the error.
// The failure stays in the child unless the caller decides otherwise
// (compat "deepagents").
func (e *Engine) runChild(ctx context.Context, c *agent) (*Message, error) {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	var err error
	if ctx.Err() == nil {
		err = e.runAgentSafe(ctx, c)
	} else {
		err = ctx.Err()
	}
	code := FinishCode(err) // before the error is worded for the parent
	switch {
	case err == nil:
	case errors.Is(err, context.DeadlineExceeded) && c.timeout > 0:
		err = fmt.Errorf("it ran out of time after %s", c.timeout)
	case errors.Is(err, context.Canceled) && context.Cause(ctx) != nil && !errors.Is(context.Cause(ctx), context.Canceled):
		err = fmt.Errorf("it was cancelled: %w", context.Cause(ctx))
	}
	receipt := &Message{Role: RoleTool, ToolCallID: c.info.TaskCallID, Kind: KindReceipt}
	fin := AgentFinished{Status: StatusDone, Steps: c.turns}
	if err != nil {
		receipt.Content, receipt.IsError = failureReceipt(c.info.Name, err), true
		fin.Status, fin.Error, fin.Code = StatusFailed, err.Error(), code
		fin.StoppedBy = StopReason(ctx)
	} else {
		receipt.Content = receiptText(c)
	}
	fin.Receipt = receipt.Content
	e.emit(c.info.ID, EventAgentFinished, fin)
	return receipt, err
}

// emit appends an event to the session's log. Encoding is left to the
// sink (Event.Encode), so a sink that stores in the background keeps it off
// the agents' path.
func (e *Engine) emit(agentID string, typ EventType, data any) {
	e.evMu.Lock()
	defer e.evMu.Unlock()
	e.seq++
	e.cfg.Sink.Emit(Event{Seq: e.seq, Type: typ, AgentID: agentID, At: e.now(), Payload: data})
}

// emitLive sends an event that is not part of the log (seq 0): streamed
// text, shown live and never stored.
func (e *Engine) emitLive(agentID string, typ EventType, data any) {
	e.evMu.Lock()
	defer e.evMu.Unlock()
	e.cfg.Sink.Emit(Event{Type: typ, AgentID: agentID, At: e.now(), Payload: data})
}
