package delegation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// Spec is a subagent's specification (delegation.md §2).
type Spec struct {
	Name         string
	Description  string
	SystemPrompt string
	// Mode is "isolated" (the default when empty), "fork", or "handoff" (an
	// old name for isolated).
	Mode Mode
	// Tools are names from the stack; nil means the parent's tools without
	// task and write_todos for an isolated child, and the parent's tools
	// unchanged for a fork. A fork's own tools are used as given, with task.
	// Under compat "deepagents" the filesystem tools always come, and these
	// add to them (withFilesystemTools).
	Tools  []string
	Model  string
	Skills []string
	// ResponseFormat is a JSON Schema object with a "title", or nil.
	ResponseFormat json.RawMessage
	// MaxSteps caps the child's model calls; 0 means the main agent's
	// max_steps, as deepagents' recursion limit reaches its subagents.
	MaxSteps int
	// Timeout ends the child with an error receipt; 0 means none.
	Timeout time.Duration
	// Summarization is this child's own threshold; zero fields take the
	// defaults, never the parent's (delegation.md §7).
	Summarization Summarization
	// Pricing is what this child's tokens cost; nil means the team's.
	Pricing *Price
}

// Merge says how a child's files come back (delegation.md §6).
type Merge string

const (
	// MergeDelta applies each child's writes and deletes in tool-call order:
	// a sibling that never touched a file cannot overwrite it, but when two
	// agents change the same path in one message the later in call order
	// wins and the earlier change is lost, as in deepagents.
	MergeDelta Merge = "delta"
	// MergeSnapshot copies each child's whole file map over the parent's, per
	// path, in call order: deepagents' behaviour, kept to show its lost update.
	MergeSnapshot Merge = "snapshot"
)

// Summarization configures when an agent's history is summarized (§7). It
// is always on, as in deepagents; zero fields take the defaults.
type Summarization struct {
	MaxTokens    int // summarize when the context reaches this; 0 means DefaultSummaryMaxTokens
	KeepMessages int // messages kept after the summary; 0 means DefaultKeepMessages
}

// Compat names an engine whose behaviour a team follows where ours
// deliberately differs (delegation.md §9).
type Compat string

const (
	// CompatNone keeps our choices: failure stays in the child, the delta
	// merge, the concurrency cap.
	CompatNone Compat = ""
	// CompatDeepagents switches them to deepagents' behaviour: a child's
	// failure fails its parent and cancels its siblings, children's whole
	// file maps are merged (snapshot), the task calls of one message all
	// run at once, and a subagent's tools add to the filesystem tools.
	CompatDeepagents Compat = "deepagents"
)

// MainSpec is the main agent and the team's settings.
type MainSpec struct {
	SystemPrompt string
	// Tools are names from the stack; nil means the default stack of eight.
	Tools []string
	// NoGeneralPurpose turns the built-in general-purpose subagent off.
	NoGeneralPurpose bool
	Model            string
	// MaxSteps caps the main agent's model calls and, unless a subagent
	// sets its own, each child's; 0 means DefaultMaxSteps.
	MaxSteps int
	// MaxConcurrency is how many task calls of one message run at once; 0
	// means DefaultMaxConcurrency, and after BuildTeam 0 means no cap
	// (compat "deepagents").
	MaxConcurrency int
	FilesMerge     Merge
	Summarization  Summarization
	// Compat switches our deliberate differences to another engine's
	// behaviour; "" keeps ours.
	Compat Compat
	// Pricing is what every agent's tokens cost, unless a subagent has its
	// own; nil means the price table's for each agent's model.
	Pricing *Price
}

// TeamSpec is everything a team is built from.
type TeamSpec struct {
	Main      MainSpec
	Subagents []Spec
}

// Defaults.
const (
	// DefaultMaxSteps is the model calls an agent may make. deepagents caps
	// its graph at recursion_limit 9_999 steps (libs/deepagents/deepagents/
	// graph.py:937, create_deep_agent's with_config; deepagentsjs
	// src/agent.ts:546, 10_000), and an agent's turn is two steps (the model
	// node, then the tools node): about 4,999 model calls, for the main agent
	// and, through the inherited config, for every child (a recursion limit
	// of 2n+2 lets a deepagents agent make n model calls).
	DefaultMaxSteps       = 4999
	DefaultMaxConcurrency = 8
	// DefaultSummaryMaxTokens and DefaultKeepMessages are deepagents'
	// summarization defaults for a model whose context window is unknown
	// (middleware/summarization.py:284-288, compute_summarization_defaults:
	// trigger ("tokens", 170000), keep ("messages", 6)).
	DefaultSummaryMaxTokens = 170000
	DefaultKeepMessages     = 6
	// structuredAttempts is how many invalid structured answers a child may
	// give before it fails.
	structuredAttempts = 3
)

// GeneralPurposeName is the built-in subagent's name; declaring a subagent
// with this name replaces the built-in one.
const GeneralPurposeName = "general-purpose"

// GeneralPurpose is the built-in subagent, listed first unless replaced or
// turned off.
var GeneralPurpose = Spec{
	Name: GeneralPurposeName,
	// Ours, at the size and with the content of deepagents'
	// DEFAULT_GENERAL_PURPOSE_DESCRIPTION (346 characters) and
	// DEFAULT_SUBAGENT_PROMPT (286), middleware/subagents.py:299 and 247-250.
	Description: "General-purpose agent for researching complex questions, searching for files and content, and carrying out " +
		"multi-step tasks. When you are looking for a keyword or a file and are not confident you will find the right match " +
		"in the first few tries, use this agent to do the search for you. It has all the tools you have, except task, so it cannot delegate.",
	SystemPrompt: "You are a subagent: another agent has given you one task, and you have the standard tools to carry it out.\n\n" +
		"The agent that called you sees only your final message, not your intermediate work, your tool calls and their " +
		"results, or any notes you kept. Make your final message the whole answer.",
	Mode: ModeIsolated,
}

// Team is a validated team, ready to run: the main agent, its subagents in
// list order (general-purpose first unless replaced or off), and the task
// tool's description built from them.
type Team struct {
	Main      MainSpec
	Subagents []*Subagent
	byName    map[string]*Subagent
	mainTools []*tool
	// Warnings are problems that do not stop the team from running.
	Warnings FieldErrors
}

// Subagent is a validated subagent spec with its mode normalized and its
// tools resolved.
type Subagent struct {
	Spec
	tools      []*tool // its own tools: an isolated child's, or a fork's that lists some
	structured *structuredTool
	// forkOwnTools is set for a fork whose spec lists its tools; forkTaskAt
	// is where task goes among them.
	forkOwnTools bool
	forkTaskAt   int
}

// Subagent returns the named subagent, or nil.
func (t *Team) Subagent(name string) *Subagent { return t.byName[name] }

// Names lists the subagents' names in list order.
func (t *Team) Names() []string {
	names := make([]string, len(t.Subagents))
	for i, s := range t.Subagents {
		names[i] = s.Name
	}
	return names
}

// MainTools returns the main agent's tool definitions, in order.
func (t *Team) MainTools() []ToolDef { return defs(t.mainTools) }

// SubagentTools returns the tool definitions the named subagent's child
// receives, in order.
func (t *Team) SubagentTools(name string) []ToolDef {
	s := t.byName[name]
	if s == nil {
		return nil
	}
	return defs(t.childTools(s, t.mainTools))
}

var toolNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`) })

// BuildTeam validates a team spec (delegation.md §2) and builds it. Every
// problem is reported at once, each tied to its field, before any model is
// called; the error is a FieldErrors.
func BuildTeam(ts TeamSpec) (*Team, error) {
	var errs FieldErrors
	t := &Team{Main: ts.Main, byName: map[string]*Subagent{}}
	m := &t.Main
	errs = append(errs, checkMain(m)...)
	errs = append(errs, checkSummarization("agent.summarization", &m.Summarization)...)
	if m.Tools == nil {
		m.Tools = DefaultTools()
	}
	var mainHasTask bool
	for i, name := range m.Tools {
		if name == TaskToolName {
			mainHasTask = true
			continue
		}
		tl := stackTool(name)
		if tl == nil {
			errs.Add(fmt.Sprintf("agent.tools[%d]", i), "unknown tool '%s'; the tools are %s", name, strings.Join(StackToolNames(), ", "))
			continue
		}
		t.mainTools = append(t.mainTools, tl)
	}

	// The list the parent chooses from: general-purpose first, unless the
	// user declares one (which replaces it) or turns it off.
	var list []Spec
	declaresGP := false
	for _, s := range ts.Subagents {
		if s.Name == GeneralPurposeName {
			declaresGP = true
		}
	}
	offset := 0
	if !m.NoGeneralPurpose && !declaresGP {
		list = append(list, GeneralPurpose)
		offset = 1
	}
	list = append(list, ts.Subagents...)
	if len(list) == 0 && mainHasTask {
		errs.Add("subagents", "At least one subagent must be specified")
	}

	seen := map[string]bool{}
	for i, s := range list {
		field := fmt.Sprintf("subagents[%d]", i-offset)
		sub, serrs := buildSubagent(s, field, m, seen)
		errs = append(errs, serrs...)
		// A name counts as taken even when its spec has other problems, so
		// a duplicate is reported too.
		seen[s.Name] = true
		if sub != nil {
			t.Subagents = append(t.Subagents, sub)
			t.byName[s.Name] = sub
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if mainHasTask {
		// The task tool's description depends on the list, so it is built
		// per team, and placed where the user listed it.
		task := newTaskTool(t.Subagents)
		t.mainTools = t.mainTools[:0]
		for _, name := range m.Tools {
			if name == TaskToolName {
				t.mainTools = append(t.mainTools, task)
			} else {
				t.mainTools = append(t.mainTools, stackTool(name))
			}
		}
	}
	return t, nil
}

// checkMain validates the main agent's limits, merge and compat settings,
// and fills in their defaults.
func checkMain(m *MainSpec) FieldErrors {
	var errs FieldErrors
	if m.MaxSteps < 0 {
		errs.Add("agent.max_steps", "max_steps must be 1 or more (it caps the main agent's model calls); got %d", m.MaxSteps)
	}
	if m.MaxSteps == 0 {
		m.MaxSteps = DefaultMaxSteps
	}
	if m.MaxConcurrency < 0 {
		errs.Add("agent.max_concurrency", "max_concurrency must be 1 or more; got %d", m.MaxConcurrency)
	}
	switch m.FilesMerge {
	case "", MergeDelta, MergeSnapshot:
	default:
		errs.Add("agent.files_merge", "files_merge must be 'delta' or 'snapshot'; got '%s'", m.FilesMerge)
	}
	switch m.Compat {
	case CompatNone:
		if m.FilesMerge == "" {
			m.FilesMerge = MergeDelta
		}
		if m.MaxConcurrency == 0 {
			m.MaxConcurrency = DefaultMaxConcurrency
		}
	case CompatDeepagents:
		// The three settings compat switches are ours to set, not the
		// user's: a contradiction is reported rather than silently won.
		if m.FilesMerge == MergeDelta {
			errs.Add("agent.files_merge", "files_merge 'delta' contradicts compat 'deepagents', which merges each child's whole file map as deepagents does; remove one of the two")
		}
		if m.MaxConcurrency > 0 {
			errs.Add("agent.max_concurrency", "max_concurrency contradicts compat 'deepagents', which runs every task call of a message at once as deepagents does; remove one of the two")
		}
		m.FilesMerge, m.MaxConcurrency = MergeSnapshot, 0
	default:
		errs.Add("agent.compat", "compat must be 'deepagents' (follow deepagents where we deliberately differ) or empty (our behaviour); got '%s'", m.Compat)
	}
	return errs
}

// buildSubagent validates one spec; it returns nil when the spec cannot be
// used at all.
func buildSubagent(s Spec, field string, m *MainSpec, seen map[string]bool) (*Subagent, FieldErrors) {
	parentTools := m.Tools
	var errs FieldErrors
	name := s.Name
	switch {
	case strings.TrimSpace(name) == "":
		errs.Add(field+".name", "every subagent needs a name: it is what the parent puts in subagent_type")
	case seen[name]:
		errs.Add(field+".name", "Duplicate subagent name '%s'; each subagent must have a unique name.", name)
	case name == "main":
		errs.Add(field+".name", "the name 'main' is the main agent's; give the subagent another name")
	}
	if strings.TrimSpace(s.Description) == "" {
		errs.Add(field+".description", "SubAgent '%s' needs a description: it is the line the parent reads when choosing whom to delegate to", name)
	}
	switch s.Mode {
	case "", "handoff":
		s.Mode = ModeIsolated
	case ModeIsolated, ModeFork:
	default:
		errs.Add(field+".mode", "SubAgent '%s' has invalid mode '%s'; expected 'isolated' or 'fork'", name, s.Mode)
	}
	if s.Mode == ModeFork && len(s.Skills) > 0 {
		errs.Add(field+".skills", "SubAgent '%s' cannot set skills under mode='fork'; the parent's skills are inherited instead.", name)
	}
	if s.MaxSteps < 0 {
		errs.Add(field+".max_steps", "max_steps must be 1 or more; got %d", s.MaxSteps)
	}
	if s.MaxSteps == 0 {
		// The main agent's limit reaches its children: deepagents passes
		// the task tool's config, recursionLimit included, to the child's
		// invoke (deepagentsjs src/middleware/subagents.ts:884-901,
		// `{...config, …}`), and the child's graph counts its own steps
		// against it. A child's own max_steps is ours.
		s.MaxSteps = m.MaxSteps
	}
	if s.Timeout < 0 {
		errs.Add(field+".timeout_ms", "timeout_ms must be 0 (none) or more")
	}
	errs = append(errs, checkSummarization(field+".summarization", &s.Summarization)...)
	sub := &Subagent{Spec: s}

	// A fork without tools of its own takes its parent's, unchanged, when it
	// starts (forkContext); with tools of its own it gets those and task.
	names := s.Tools
	if names == nil && s.Mode != ModeFork {
		names = isolatedDefault(parentTools)
	}
	hasTask := false
	for i, n := range names {
		if n == TaskToolName {
			if s.Mode != ModeFork {
				errs.Add(fmt.Sprintf("%s.tools[%d]", field, i), "SubAgent '%s' cannot have the task tool: a subagent cannot delegate further", name)
			}
			hasTask = true
			continue
		}
		tl := stackTool(n)
		if tl == nil {
			errs.Add(fmt.Sprintf("%s.tools[%d]", field, i), "SubAgent '%s' has unknown tool '%s'; the tools are %s", name, n, strings.Join(StackToolNames(), ", "))
			continue
		}
		sub.tools = append(sub.tools, tl)
	}
	sub.forkOwnTools = s.Mode == ModeFork && s.Tools != nil
	sub.forkTaskAt = -1
	if sub.forkOwnTools {
		// task stays where the spec lists it, or comes last.
		sub.forkTaskAt = len(sub.tools)
		if hasTask {
			sub.forkTaskAt = slices.Index(names, TaskToolName)
		}
	}
	if s.Tools != nil && m.Compat == CompatDeepagents {
		sub.tools, sub.forkTaskAt = withFilesystemTools(sub.tools, sub.forkOwnTools)
	}

	if rf := bytes.TrimSpace(s.ResponseFormat); len(rf) > 0 && !bytes.Equal(rf, []byte("null")) {
		st, msg := newStructuredTool(rf)
		switch {
		case msg != "":
			errs.Add(field+".response_format", "SubAgent '%s' %s", name, msg)
		default:
			for _, n := range append(StackToolNames(), TaskToolName) {
				if st.def.Name == n {
					errs.Add(field+".response_format", "SubAgent '%s' response_format title '%s' clashes with the tool of that name; choose another title", name, n)
				}
			}
			sub.structured = st
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return sub, nil
}

// checkSummarization checks one agent's summarization settings and fills
// in the defaults. A child gets the defaults, not its parent's settings:
// deepagents builds each agent's summarization middleware from that
// agent's own model (graph.py:673, create_summarization_middleware(
// subagent_model, backend)).
func checkSummarization(field string, s *Summarization) FieldErrors {
	var errs FieldErrors
	if s.MaxTokens < 0 {
		errs.Add(field+".max_tokens", "max_tokens must be 1 or more (0 means the default, %d); got %d", DefaultSummaryMaxTokens, s.MaxTokens)
	}
	if s.KeepMessages < 0 {
		errs.Add(field+".keep_messages", "keep_messages must be 1 or more (0 means the default, %d); got %d", DefaultKeepMessages, s.KeepMessages)
	}
	if s.MaxTokens <= 0 {
		s.MaxTokens = DefaultSummaryMaxTokens
	}
	if s.KeepMessages <= 0 {
		s.KeepMessages = DefaultKeepMessages
	}
	return errs
}

// isolatedDefault is an isolated child's tools when its spec lists none:
// the parent's, without task (a child cannot delegate) and without
// write_todos. deepagents gives a subagent its spec's tools or the parent's
// own tools (graph.py:726-728) and the default subagent middleware
// (graph.py:667-675: filesystem, summarization, patch tool calls); the todo
// list is middleware of the main agent only, so no subagent inherits it.
func isolatedDefault(parentTools []string) []string {
	var names []string
	for _, n := range parentTools {
		if n != TaskToolName && n != WriteTodosToolName {
			names = append(names, n)
		}
	}
	return names
}

// withFilesystemTools is a child's own tools as deepagents gives them, under
// compat "deepagents": the filesystem tools always, in the stack's order
// (deepagentsjs FILESYSTEM_TOOL_NAMES, src/middleware/fs.ts:101-110, execute
// left out with a backend that runs nothing), for a fork then task, then
// write_todos when the spec lists it (in deepagents it comes from the todo
// middleware, after those). In ours a spec's tools are the child's whole set,
// so a lesson can give a child fewer; in deepagents every subagent's
// middleware starts with the FilesystemMiddleware, which brings its tools,
// and the spec's `tools` are added to them (deepagentsjs agent.ts:318-323,
// src/middleware/subagents.ts:727-731 and :743-749; the fork's task is
// spliced in after the FilesystemMiddleware, :715-725). It returns the
// tools and, for a fork, where task goes (-1 otherwise).
func withFilesystemTools(listed []*tool, fork bool) ([]*tool, int) {
	var out, rest []*tool
	for _, name := range defaultToolNames {
		if name != TaskToolName {
			out = append(out, stackTool(name))
		}
	}
	for _, t := range listed {
		if !slices.Contains(defaultToolNames, t.def.Name) {
			rest = append(rest, t)
		}
	}
	taskAt := -1
	if fork {
		taskAt = len(out)
	}
	return append(out, rest...), taskAt
}

// childTools is the tool list a child of s starts with. A fork without
// tools of its own gets the parent's unchanged, task included (its prompt
// prefix then matches the parent's); a fork with its own gets them and
// task, and loses that match. deepagentsjs builds a fork from
// `agentParams.tools ?? defaultTools` and mirrors the task tool into it
// (src/middleware/subagents.ts:720-731, npm deepagents 1.14.1).
func (t *Team) childTools(s *Subagent, parent []*tool) []*tool {
	var tools []*tool
	switch {
	case s.Mode == ModeFork && !s.forkOwnTools:
		tools = append(tools, parent...)
	case s.Mode == ModeFork:
		task := t.taskTool()
		tools = append(tools, s.tools[:s.forkTaskAt]...)
		if task != nil {
			tools = append(tools, task)
		}
		tools = append(tools, s.tools[s.forkTaskAt:]...)
	default:
		tools = append(tools, s.tools...)
	}
	if s.structured != nil {
		tools = append(tools, &s.structured.tool)
	}
	return tools
}

// taskTool is the team's task tool, or nil when the main agent has none.
func (t *Team) taskTool() *tool {
	for _, tl := range t.mainTools {
		if tl.def.Name == TaskToolName {
			return tl
		}
	}
	return nil
}
