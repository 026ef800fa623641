package ingest

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
)

// Placement is where a model call belongs, as Place infers it.
type Placement struct {
	// Agent is the existing agent the call continues; "" when it starts one.
	Agent string
	// Main: the call starts the main agent (the session's first).
	Main bool
	// A new child: the agent whose task call started it, that call, and
	// the mode its first input shows (fork: it begins with Inherited
	// messages of the parent's history).
	Parent       string
	TaskCallID   string
	SubagentType string
	Mode         delegation.Mode
	Inherited    int
	// Unattached: nothing explains the call; it gets an agent of its own.
	Unattached bool
	// Shared counts the call's first messages that the session already
	// holds: the agent's history it extends, or the parent's history a
	// fork inherits. A producer choosing among sessions takes the one that
	// explains most.
	Shared int
	// Why says, for a person, what decided it.
	Why string

	tc   *toolCall
	weak bool
}

// Weak reports whether the placement is a guess: the call only begins like
// an agent's history, or only its agent name matches a waiting delegation.
func (p Placement) Weak() bool { return p.weak }

// Place infers, without recording anything, where a model call belongs
// (docs/ingest.md, "Who is calling"):
//
//  1. a Hint.Key seen before names its agent;
//  2. a call whose input extends an agent's history (its previous call's
//     input, its answer and the results since) continues that agent — the
//     longest such history wins;
//  3. otherwise a task call still waiting for its child is looked for, in
//     call order: the child's last user message holds the call's
//     description (and its Hint.Name, when given, is the call's
//     subagent_type); the child is a fork when its input begins with the
//     history its parent had when it made the call, isolated otherwise;
//  4. the session's first call starts the main agent;
//  5. a call sharing the start of an agent's history continues it (its
//     history was trimmed or summarized);
//  6. a pending task call whose subagent_type is Hint.Name;
//  7. anything else is unattached: an agent of its own, flagged.
func (s *Session) Place(in CallInput) Placement {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.place(in)
	p.tc = nil
	return p
}

func (s *Session) place(in CallInput) Placement {
	input := normalize(in.Input)
	if in.Hint.Key != "" {
		if a := s.byKey[in.Hint.Key]; a != nil {
			return Placement{Agent: a.info.ID, Why: "its span belongs to this agent's run"}
		}
	}
	var best *agent
	bestLen := 0
	for _, a := range s.agents {
		if !s.canContinue(a, in.Hint.Name) {
			continue
		}
		n := delegation.RangesLen(a.history)
		if n == 0 || n <= bestLen {
			continue
		}
		if s.prefix(input, a.history) == n {
			best, bestLen = a, n
		}
	}
	if best != nil {
		return Placement{Agent: best.info.ID, Shared: bestLen, Why: "its input extends this agent's history"}
	}
	if p, ok := s.matchDelegation(input, in.Hint.Name, true); ok {
		return p
	}
	if s.main == nil {
		return Placement{Main: true, Why: "the session's first model call"}
	}
	bestLen = 0
	for _, a := range s.agents {
		if !s.canContinue(a, in.Hint.Name) {
			continue
		}
		if n := s.prefix(input, a.history); n > bestLen {
			best, bestLen = a, n
		}
	}
	if best != nil {
		return Placement{Agent: best.info.ID, Shared: bestLen, Why: "its input begins like this agent's history (trimmed or summarized since)", weak: true}
	}
	if p, ok := s.matchDelegation(input, in.Hint.Name, false); ok {
		return p
	}
	return Placement{Unattached: true, Why: "no agent's history and no waiting delegation explains it"}
}

// canContinue: a child whose receipt came back is done; an agent waits for
// its answer before its next call; a name, when known, must match.
func (s *Session) canContinue(a *agent, name string) bool {
	if a.open != nil || (a.finished && a != s.main) {
		return false
	}
	return name == "" || name == a.info.Name || (a == s.main && name == "main")
}

// matchDelegation finds the waiting task call that explains a child's first
// input; byContent demands its description in the last user message. When
// the team's modes are known (Config.Modes), a call whose subagent's mode
// is not the mode the input shows is taken only if no other fits: two task
// calls with one description in one answer, one isolated and one a fork,
// are told apart whatever order their children's requests arrive in.
func (s *Session) matchDelegation(input []Message, name string, byContent bool) (Placement, bool) {
	lastUser := ""
	for i := len(input) - 1; i >= 0; i-- {
		if input[i].Role == delegation.RoleUser {
			lastUser = strings.TrimSpace(input[i].Content)
			break
		}
	}
	var fallback *Placement
	for _, a := range s.agents {
		for _, tc := range a.pending {
			if tc.task == nil || tc.child != nil || tc.added || tc.refused {
				continue
			}
			if name != "" && name != "main" && tc.task.typed && name != tc.task.SubagentType {
				continue
			}
			desc := strings.TrimSpace(tc.task.Description)
			if byContent && (desc == "" || !strings.Contains(lastUser, desc)) {
				continue
			}
			p := Placement{Parent: a.info.ID, TaskCallID: tc.call.ID, SubagentType: tc.task.SubagentType,
				Mode: delegation.ModeIsolated, tc: tc, Why: "its task is the description of this waiting task call"}
			if !byContent {
				p.Why, p.weak = "its agent name is the subagent type of this waiting task call", true
			}
			if n := s.prefix(input, tc.inherit); n > 0 && n < len(input) {
				p.Mode, p.Inherited, p.Shared = delegation.ModeFork, n, n
				p.Why += ", and its input begins with the parent's history (a fork)"
			}
			if want, known := s.cfg.Modes[tc.task.SubagentType]; known && want != p.Mode {
				if fallback == nil {
					fallback = &p
				}
				continue
			}
			return p, true
		}
	}
	if fallback != nil {
		return *fallback, true
	}
	return Placement{}, false
}

// normalize gives every message a role of ours and JSON arguments.
func normalize(in []Message) []Message {
	out := make([]Message, len(in))
	for i, m := range in {
		switch m.Role {
		case delegation.RoleUser, delegation.RoleAssistant, delegation.RoleTool:
		default:
			m.Role = delegation.RoleUser
		}
		if len(m.ToolCalls) > 0 {
			calls := make([]delegation.ToolCall, len(m.ToolCalls))
			for j, c := range m.ToolCalls {
				c.Args = jsonArgs(c.Args)
				calls[j] = c
			}
			m.ToolCalls = calls
		}
		out[i] = m
	}
	return out
}

// prefix counts the messages input begins with of the messages ranges
// name, reading them in place: every call compares its input with every
// agent's history, so nothing is copied for it.
func (s *Session) prefix(input []Message, rs []delegation.Range) int {
	n := 0
	for _, r := range rs {
		a := s.byID[r.AgentID]
		if a == nil {
			return n
		}
		for _, m := range a.msgs[r.From:r.To] {
			if n >= len(input) || !sameMessage(input[n], m) {
				return n
			}
			n++
		}
	}
	return n
}

// sameMessage compares what a model reads of two messages. Ids are compared
// only when both have one: instrumentations often drop them.
func sameMessage(m Message, h *delegation.Message) bool {
	if m.Role != h.Role || m.Content != h.Content || len(m.ToolCalls) != len(h.ToolCalls) {
		return false
	}
	if m.ToolCallID != "" && h.ToolCallID != "" && m.ToolCallID != h.ToolCallID {
		return false
	}
	for i, c := range m.ToolCalls {
		d := h.ToolCalls[i]
		if c.Name != d.Name || (c.ID != "" && d.ID != "" && c.ID != d.ID) || !sameArgs(c.Args, d.Args) {
			return false
		}
	}
	return true
}

// sameArgs compares two tool-call arguments as JSON values when both are
// JSON, else as text.
func sameArgs(a, b json.RawMessage) bool {
	if bytes.Equal(bytes.TrimSpace(a), bytes.TrimSpace(b)) {
		return true
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
