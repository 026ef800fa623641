package view

import (
	"encoding/json"
	"fmt"
	"iter"
	"maps"
	"slices"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

// SnapshotVersion numbers the snapshot's encoding: a store that holds
// another rebuilds the state from the log.
const SnapshotVersion = 3

// snapshot is the state as stored: what a page of a finished session needs.
type snapshot struct {
	Session     Session       `json:"session"`
	Seq         int64         `json:"seq"`
	Agents      []*Agent      `json:"agents"`
	Delegations []*Delegation `json:"delegations"`
	Calls       int           `json:"calls"`
	Tokens      int           `json:"tokens"`
	Cached      int           `json:"cached"`
	Cost        Money         `json:"cost"`
	Files       int           `json:"files"`
	Notes       []Note        `json:"notes"`
	Budget      int           `json:"budget"`
	LastAt      time.Time     `json:"last_at"`
}

// MarshalJSON encodes the state for the store. Running calls and the rules'
// pending work are not kept: a session is snapshotted when it has ended.
func (s *State) MarshalJSON() ([]byte, error) {
	return json.Marshal(snapshot{Session: s.Session, Seq: s.Seq, Agents: s.Agents, Delegations: s.Delegations,
		Calls: s.Calls, Tokens: s.Tokens, Cached: s.Cached, Cost: s.Cost, Files: s.Files.Count(), Notes: s.Notes, Budget: s.budget,
		LastAt: s.LastAt})
}

// Restore decodes a state MarshalJSON wrote.
func Restore(b []byte) (*State, error) {
	var sn snapshot
	if err := json.Unmarshal(b, &sn); err != nil {
		return nil, fmt.Errorf("read a session's stored view: %w", err)
	}
	s := New(Meta{ID: sn.Session.ID, Title: sn.Session.Title, Budget: sn.Budget})
	s.Session, s.Seq, s.Calls, s.Tokens, s.Notes, s.LastAt = sn.Session, sn.Seq, sn.Calls, sn.Tokens, sn.Notes, sn.LastAt
	s.Cached, s.Cost = sn.Cached, sn.Cost
	s.Files.count = sn.Files
	for _, a := range sn.Agents {
		a.summaryAt, a.lastAssistant = -1, -1
		s.Agents = append(s.Agents, a)
		s.agents[a.ID] = a
	}
	for _, d := range sn.Delegations {
		s.Delegations = append(s.Delegations, d)
		s.byChild[d.ChildID] = d
		s.byTaskCall[d.TaskCallID] = d
	}
	return s, nil
}

// Clone copies what a view renders, so it can render without holding the
// lock of a state that goes on changing. Of the file index it copies the
// first page's paths (what a page lists) and the count; the store has the
// rest.
func (s *State) Clone() *State {
	c := New(Meta{ID: s.Session.ID, Title: s.Session.Title, Budget: s.budget})
	c.Session, c.Seq, c.Calls, c.Tokens, c.Cached, c.Cost, c.LastAt = s.Session, s.Seq, s.Calls, s.Tokens, s.Cached, s.Cost, s.LastAt
	c.Notes = slices.Clip(s.Notes)
	c.Files = Files{paths: s.Files.Page(), count: s.Files.Count()}
	for _, a := range s.Agents {
		ac := *a
		ac.History = a.History.clone()
		ac.Refused = slices.Clone(a.Refused) // a refusal's message id is filled in later
		ac.Summaries = slices.Clip(a.Summaries)
		ac.EvictedRefs = slices.Clip(a.EvictedRefs)
		ac.CallSteps = slices.Clone(a.CallSteps) // its last run grows
		if a.Last != nil {
			l := *a.Last
			ac.Last = &l
		}
		c.Agents = append(c.Agents, &ac)
		c.agents[ac.ID] = &ac
	}
	for _, d := range s.Delegations {
		dc := *d
		dc.FilesBack = slices.Clip(d.FilesBack)
		c.Delegations = append(c.Delegations, &dc)
		c.byChild[dc.ChildID] = &dc
		c.byTaskCall[dc.TaskCallID] = &dc
	}
	c.starts = slices.Clone(s.starts)
	c.RunningTools = maps.Clone(s.RunningTools)
	c.Running = maps.Clone(s.Running)
	for id, r := range c.Running {
		rc := *r
		c.Running[id] = &rc
	}
	return c
}

// Build folds a whole log, from its first event.
func Build(meta Meta, events []delegation.Event) (*State, error) {
	s := New(meta)
	for _, ev := range events {
		if _, err := s.Apply(ev); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// FromTrace folds a trace's log: the state of a session read whole, for the
// command line and for a session whose stored view is missing.
func FromTrace(t *trace.Trace, budget int) (*State, error) {
	return FromLog(t.Session, budget, trace.SourceOf(t).Log())
}

// FromLog folds a session's log as a source reads it, step by step (a
// trace's, a store's cursor): the state of a session whose stored view is
// missing, folded without holding its log. The session is as the source
// describes it; its status counts when the log did not end (a crash).
func FromLog(sess trace.Session, budget int, log iter.Seq2[trace.Step, error]) (*State, error) {
	s := New(Meta{ID: sess.ID, Name: sess.Name, Title: sess.Title, Prompt: sess.Prompt, Tokenizer: sess.Tokenizer, Budget: budget})
	for st, err := range log {
		if err != nil {
			return nil, err
		}
		var ch Changes // nobody watches: what changed is dropped
		if err := s.ApplyStep(st, &ch); err != nil {
			return nil, err
		}
	}
	// A session that did not end in its log (a crash) has its status from
	// the store.
	if s.Session.Status == delegation.StatusRunning && sess.Status != delegation.StatusRunning {
		s.Session.Status, s.Session.Error = sess.Status, sess.Error
		clear(s.Running)
	}
	return s, nil
}

// BudgetOf reads a scenario's summarization threshold, for Meta.Budget.
func BudgetOf(scenario json.RawMessage) int {
	var sc struct {
		Agent struct {
			Summarization struct {
				MaxTokens int `json:"max_tokens"`
			} `json:"summarization"`
		} `json:"agent"`
	}
	if json.Unmarshal(scenario, &sc) != nil {
		return 0
	}
	return sc.Agent.Summarization.MaxTokens
}
