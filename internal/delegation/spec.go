package delegation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
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
	// task. A fork child ignores it: it gets the parent's tools unchanged.
	Tools  []string
	Model  string
	Skills []string
	// ResponseFormat is a JSON Schema object with a "title", or nil.
	ResponseFormat json.RawMessage
	// MaxSteps caps the child's model calls; 0 means DefaultMaxSteps.
	MaxSteps int
	// Timeout ends the child with an error receipt; 0 means none.
	Timeout time.Duration
}

// Merge says how a child's files come back (delegation.md §6).
type Merge string

const (
	// MergeDelta applies each child's writes and deletes in tool-call order:
	// nothing is lost.
	MergeDelta Merge = "delta"
	// MergeSnapshot copies each child's whole file map over the parent's, per
	// path, in call order: deepagents' behaviour, kept to show its lost update.
	MergeSnapshot Merge = "snapshot"
)

// Summarization configures when an agent's history is summarized (§7).
type Summarization struct {
	MaxTokens    int // 0: never
	KeepMessages int // messages kept after the summary
}

// MainSpec is the main agent and the team's settings.
type MainSpec struct {
	SystemPrompt string
	// Tools are names from the stack; nil means the default stack of eight.
	Tools []string
	// NoGeneralPurpose turns the built-in general-purpose subagent off.
	NoGeneralPurpose bool
	Model            string
	MaxSteps         int // 0 means DefaultMaxSteps
	MaxConcurrency   int // task calls of one message run at once; 0 means DefaultMaxConcurrency
	FilesMerge       Merge
	Summarization    Summarization
}

// TeamSpec is everything a team is built from.
type TeamSpec struct {
	Main      MainSpec
	Subagents []Spec
}

// Defaults.
const (
	DefaultMaxSteps       = 50
	DefaultMaxConcurrency = 8
	DefaultKeepMessages   = 6
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
	Description: "General-purpose agent for researching complex questions, searching for files and content, " +
		"and carrying out multi-step tasks. Use it when a search may take several tries, or to keep a long " +
		"piece of work out of your own context. It has the same tools as you, except task.",
	SystemPrompt: "You are a subagent, working on one task for another agent. " +
		"The agent that called you sees only your final message: not your tool calls, not their results, " +
		"not your intermediate notes. Put the complete answer in your final message: the findings, " +
		"the paths of any files you wrote, and anything the caller must do next.",
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
	tools      []*tool // for isolated children; fork children use the parent's
	structured *structuredTool
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
	return defs(t.childTools(s))
}

var toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// BuildTeam validates a team spec (delegation.md §2) and builds it. Every
// problem is reported at once, each tied to its field, before any model is
// called; the error is a FieldErrors.
func BuildTeam(ts TeamSpec) (*Team, error) {
	var errs FieldErrors
	t := &Team{Main: ts.Main, byName: map[string]*Subagent{}}
	m := &t.Main
	if m.MaxSteps < 0 {
		errs.Add("agent.max_steps", "max_steps must be 1 or more (it caps the main agent's model calls); got %d", m.MaxSteps)
	}
	if m.MaxSteps == 0 {
		m.MaxSteps = DefaultMaxSteps
	}
	if m.MaxConcurrency < 0 {
		errs.Add("agent.max_concurrency", "max_concurrency must be 1 or more; got %d", m.MaxConcurrency)
	}
	if m.MaxConcurrency == 0 {
		m.MaxConcurrency = DefaultMaxConcurrency
	}
	switch m.FilesMerge {
	case "":
		m.FilesMerge = MergeDelta
	case MergeDelta, MergeSnapshot:
	default:
		errs.Add("agent.files_merge", "files_merge must be 'delta' or 'snapshot'; got '%s'", m.FilesMerge)
	}
	if m.Summarization.MaxTokens < 0 {
		errs.Add("agent.summarization.max_tokens", "max_tokens must be 0 (off) or more; got %d", m.Summarization.MaxTokens)
	}
	if m.Summarization.KeepMessages < 0 {
		errs.Add("agent.summarization.keep_messages", "keep_messages must be 1 or more; got %d", m.Summarization.KeepMessages)
	}
	if m.Summarization.KeepMessages == 0 {
		m.Summarization.KeepMessages = DefaultKeepMessages
	}
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
		sub, serrs := buildSubagent(s, field, m.Tools, seen)
		errs = append(errs, serrs...)
		// A name counts as taken even when its spec has other problems, so
		// a duplicate is reported too.
		seen[s.Name] = true
		if sub != nil {
			t.Subagents = append(t.Subagents, sub)
			t.byName[s.Name] = sub
		}
		if s.Mode == ModeFork && s.Tools != nil {
			t.Warnings.Add(field+".tools", "ignored under mode='fork': a fork child gets the parent's tools unchanged, so its prompt prefix matches the parent's")
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

// buildSubagent validates one spec; it returns nil when the spec cannot be
// used at all.
func buildSubagent(s Spec, field string, parentTools []string, seen map[string]bool) (*Subagent, FieldErrors) {
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
		s.MaxSteps = DefaultMaxSteps
	}
	if s.Timeout < 0 {
		errs.Add(field+".timeout_ms", "timeout_ms must be 0 (none) or more")
	}
	sub := &Subagent{Spec: s}

	names := s.Tools
	if names == nil {
		for _, n := range parentTools {
			if n != TaskToolName {
				names = append(names, n)
			}
		}
	}
	for i, n := range names {
		if n == TaskToolName {
			if s.Tools != nil && s.Mode != ModeFork {
				errs.Add(fmt.Sprintf("%s.tools[%d]", field, i), "SubAgent '%s' cannot have the task tool: a subagent cannot delegate further", name)
			}
			continue
		}
		tl := stackTool(n)
		if tl == nil {
			errs.Add(fmt.Sprintf("%s.tools[%d]", field, i), "SubAgent '%s' has unknown tool '%s'; the tools are %s", name, n, strings.Join(StackToolNames(), ", "))
			continue
		}
		sub.tools = append(sub.tools, tl)
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

// childTools is the tool list a child of s starts with for an isolated
// child; a fork child's list is built from its parent's in forkContext.
func (t *Team) childTools(s *Subagent) []*tool {
	if s.Mode == ModeFork {
		tools := append([]*tool(nil), t.mainTools...)
		if s.structured != nil {
			tools = append(tools, &s.structured.tool)
		}
		return tools
	}
	tools := append([]*tool(nil), s.tools...)
	if s.structured != nil {
		tools = append(tools, &s.structured.tool)
	}
	return tools
}
