package view

import (
	"slices"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
)

// Changes says what events changed in a session's page state, for a live
// view to patch just that. Changes of several events merge (Merge) into
// what the page must do to go from the state before the first to the
// state after the last.
type Changes struct {
	// Seq is the last seq they bring the state to.
	Seq int64
	// Status: the session's status, answer or controls.
	Status bool
	// Totals: the agent, call or token counts.
	Totals bool
	// TreeShape: an agent or a refused delegation joined the tree; Agents
	// are the agents that started.
	TreeShape bool
	Agents    []string
	// Nodes are agents whose box in the tree changed (status, counters).
	Nodes []string
	// Appended are the model calls started, in order; Finished those that
	// ended (or never will), with their steps.
	Appended []string
	Finished []Finished
	// CallsBefore is the number of model calls before the first event;
	// AppendedBy the agent of each call in Appended.
	CallsBefore int
	AppendedBy  []string
	// Scrub: the scrubber's steps or its last step changed.
	Scrub bool
	// Started are delegations whose panel appeared.
	Started []string
	// Grown are agents whose context grew by new messages of their own,
	// with the length of their own part before the first (in Appends);
	// Replaced are agents whose context changed otherwise, so every pane
	// that shows it is drawn again.
	Grown    []string
	Appends  map[string]int
	Replaced []string
	// CallChanged are agents whose context belongs to a new turn call.
	CallChanged []string
	// Frozen are delegations whose parent pane stopped following the parent.
	Frozen []string
	// Crossing are delegations whose "came back" changed; HeldBack those
	// whose "held back" did (they finished).
	Crossing, HeldBack []string
	// FilesTouched are main's paths written or deleted; FilesPage is the
	// first page of main's files before the first change (nil: no change).
	FilesTouched []string
	FilesPage    []string
	FilesBefore  int
	// NotesAdded: notes were found, after the NotesBefore there were.
	NotesAdded  bool
	NotesBefore int
	// Stream is text streamed into running calls (live only).
	Stream []StreamChange
	// Spans are received spans that map to nothing of ours, to list.
	Spans []delegation.Event
	// AtBefore is the state's LastAt before the first event (Moved: set).
	AtBefore time.Time
	Moved    bool
	// Tools are tool calls that started or finished, in order.
	Tools []ToolChange
	// Worked are agents whose own work grew (messages, model or tool
	// calls): what a delegation's economics count.
	Worked []string
}

// ToolChange is a tool call starting or finishing: its bar in the timeline.
type ToolChange struct {
	AgentID, ToolCallID, Name string
	Seq                       int64
	At                        time.Time
	// Step is the model call whose answer asked for it (0: none), CallID
	// that call's id.
	Step              int
	CallID            string
	Finished, IsError bool
	// Started is when a finished one started.
	Started time.Time
}

// StreamChange is text streamed into a running call, starting at At
// (UTF-16 code units) of its stream.
type StreamChange struct {
	CallID string
	Text   string
	At     int
}

// None reports whether nothing changed.
func (c *Changes) None() bool {
	return !c.Status && !c.Totals && !c.TreeShape && len(c.Nodes) == 0 && len(c.Appended) == 0 && len(c.Finished) == 0 &&
		!c.Scrub && len(c.Started) == 0 && len(c.Grown) == 0 && len(c.Replaced) == 0 && len(c.CallChanged) == 0 &&
		len(c.Frozen) == 0 && len(c.Crossing) == 0 && len(c.HeldBack) == 0 && c.FilesPage == nil && !c.NotesAdded && len(c.Stream) == 0 &&
		len(c.Spans) == 0 && len(c.Tools) == 0 && len(c.Worked) == 0
}

// Merge adds the changes of the events after c's to c.
func (c *Changes) Merge(o Changes) {
	if o.Seq > 0 {
		c.Seq = o.Seq
	}
	c.Status = c.Status || o.Status
	c.Totals = c.Totals || o.Totals
	c.TreeShape = c.TreeShape || o.TreeShape
	c.Agents = append(c.Agents, o.Agents...)
	c.Nodes = union(c.Nodes, o.Nodes...)
	if len(c.Appended) == 0 && len(o.Appended) > 0 {
		c.CallsBefore = o.CallsBefore
	}
	c.Appended = append(c.Appended, o.Appended...)
	c.AppendedBy = append(c.AppendedBy, o.AppendedBy...)
	for _, f := range o.Finished {
		c.finish(f)
	}
	c.Scrub = c.Scrub || o.Scrub
	c.Started = append(c.Started, o.Started...)
	for _, a := range o.Grown {
		if !slices.Contains(c.Grown, a) {
			c.Grown = append(c.Grown, a)
			if c.Appends == nil {
				c.Appends = map[string]int{}
			}
			c.Appends[a] = o.Appends[a]
		}
	}
	c.Replaced = union(c.Replaced, o.Replaced...)
	c.CallChanged = union(c.CallChanged, o.CallChanged...)
	c.Frozen = union(c.Frozen, o.Frozen...)
	c.Crossing = union(c.Crossing, o.Crossing...)
	c.HeldBack = union(c.HeldBack, o.HeldBack...)
	c.FilesTouched = union(c.FilesTouched, o.FilesTouched...)
	if c.FilesPage == nil && o.FilesPage != nil {
		c.FilesPage, c.FilesBefore = o.FilesPage, o.FilesBefore
	}
	if !c.NotesAdded && o.NotesAdded {
		c.NotesAdded, c.NotesBefore = true, o.NotesBefore
	}
	c.Stream = append(c.Stream, o.Stream...)
	c.Spans = append(c.Spans, o.Spans...)
	c.Tools = append(c.Tools, o.Tools...)
	if !c.Moved && o.Moved {
		c.AtBefore, c.Moved = o.AtBefore, true
	}
	c.Worked = union(c.Worked, o.Worked...)
}

func (c *Changes) worked(agentID string) { c.Worked = union(c.Worked, agentID) }

func union(list []string, add ...string) []string {
	for _, a := range add {
		if !slices.Contains(list, a) {
			list = append(list, a)
		}
	}
	return list
}

// node marks an agent's box changed, and with ancestors its parents' (their
// subtree totals include it).
func (c *Changes) node(s *State, id string, ancestors bool) {
	for a := s.agents[id]; a != nil; a = s.agents[a.ParentID] {
		c.Nodes = union(c.Nodes, a.ID)
		if !ancestors {
			return
		}
	}
}

// Finished is a model call that ended, and its step.
type Finished struct {
	ID   string
	Step int
}

func (c *Changes) finish(f Finished) {
	for _, x := range c.Finished {
		if x.ID == f.ID {
			return
		}
	}
	c.Finished = append(c.Finished, f)
}

func (c *Changes) replaced(agentID string) { c.Replaced = union(c.Replaced, agentID) }

func (c *Changes) appended(agentID string, before int) {
	if slices.Contains(c.Grown, agentID) {
		return
	}
	c.Grown = append(c.Grown, agentID)
	if c.Appends == nil {
		c.Appends = map[string]int{}
	}
	c.Appends[agentID] = before
}

func (c *Changes) call(agentID string) { c.CallChanged = union(c.CallChanged, agentID) }

func (c *Changes) frozen(childID string) { c.Frozen = union(c.Frozen, childID) }

func (c *Changes) crossing(childID string) { c.Crossing = union(c.Crossing, childID) }

// files notes the first page of main's files before a change.
func (c *Changes) files(s *State) {
	if c.FilesPage == nil {
		c.FilesPage, c.FilesBefore = s.Files.Page(), s.Files.Count()
	}
}

// note notes that notes are about to be added.
func (c *Changes) note(s *State) {
	if !c.NotesAdded {
		c.NotesAdded, c.NotesBefore = true, len(s.Notes)
	}
}
