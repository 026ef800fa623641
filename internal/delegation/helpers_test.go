package delegation

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeModel plays fixed responses per agent: "main" for the main agent and
// "name#n" for the n-th invocation of a subagent. It records every request.
type fakeModel struct {
	mu    sync.Mutex
	turns map[string][]fakeTurn
	pos   map[string]int
	reqs  []recorded
}

type fakeTurn struct {
	content string
	calls   []ToolCall
	err     error
	panic   string
	delay   time.Duration
}

type recorded struct {
	caller   Caller
	purpose  Purpose
	system   string
	messages []Message
	tools    []string
	toolDefs []ToolDef
}

func (r recorded) contains(s string) bool {
	if strings.Contains(r.system, s) {
		return true
	}
	for _, m := range r.messages {
		if strings.Contains(m.Content, s) {
			return true
		}
		for _, c := range m.ToolCalls {
			if strings.Contains(string(c.Args), s) {
				return true
			}
		}
	}
	return false
}

func (f *fakeModel) Generate(ctx context.Context, req *Request) (*Response, error) {
	key := req.Caller.Name
	if key != "main" {
		key = fmt.Sprintf("%s#%d", key, req.Caller.Invocation)
	}
	f.mu.Lock()
	rec := recorded{caller: req.Caller, purpose: req.Purpose, system: req.System, toolDefs: req.Tools}
	for _, m := range req.Messages {
		rec.messages = append(rec.messages, *m)
	}
	for _, t := range req.Tools {
		rec.tools = append(rec.tools, t.Name)
	}
	f.reqs = append(f.reqs, rec)
	if req.Purpose == PurposeSummary {
		f.mu.Unlock()
		return &Response{Content: fmt.Sprintf("summary of %d messages", len(req.Messages))}, nil
	}
	if f.pos == nil {
		f.pos = map[string]int{}
	}
	turns := f.turns[key]
	i := f.pos[req.Caller.AgentID]
	if i >= len(turns) {
		f.mu.Unlock()
		return nil, fmt.Errorf("no turn %d for %s", i, key)
	}
	f.pos[req.Caller.AgentID] = i + 1
	t := turns[i]
	f.mu.Unlock()
	if t.delay > 0 {
		select {
		case <-time.After(t.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if t.panic != "" {
		panic(t.panic)
	}
	if t.err != nil {
		return nil, t.err
	}
	return &Response{Content: t.content, ToolCalls: append([]ToolCall(nil), t.calls...)}, nil
}

// requestsOf returns the recorded requests of one agent, in order.
func (f *fakeModel) requestsOf(agentID string) []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []recorded
	for _, r := range f.reqs {
		if r.caller.AgentID == agentID {
			out = append(out, r)
		}
	}
	return out
}

// wordCounter counts words: deterministic and easy to reason about.
type wordCounter struct{}

func (wordCounter) Count(s string) int { return len(strings.Fields(s)) }

func call(name string, args any) ToolCall {
	b, _ := json.Marshal(args)
	return ToolCall{Name: name, Args: b}
}

func task(desc, typ string) ToolCall {
	return call(TaskToolName, map[string]string{"description": desc, "subagent_type": typ})
}

// run is a finished session with its events and agents' lists.
type run struct {
	res    *Result
	events []Event
	model  *fakeModel
	log    *bytes.Buffer
}

func (r *run) ofType(t EventType) []Event {
	var out []Event
	for _, e := range r.events {
		if e.Type == t {
			out = append(out, e)
		}
	}
	return out
}

// messages returns an agent's message list, from the log.
func (r *run) messages(agentID string) []Message {
	var out []Message
	for _, e := range r.ofType(EventMessageAdded) {
		if e.AgentID != agentID {
			continue
		}
		var d MessageAdded
		if err := json.Unmarshal(e.Data, &d); err != nil {
			panic(err)
		}
		out = append(out, *d.Message)
	}
	return out
}

func (r *run) modelCalls(agentID string) []ModelCall {
	var out []ModelCall
	for _, e := range r.ofType(EventModelStarted) {
		var d ModelStarted
		_ = json.Unmarshal(e.Data, &d)
		if d.Call.AgentID == agentID {
			out = append(out, d.Call)
		}
	}
	return out
}

func (r *run) childByName(t *testing.T, name string) AgentInfo {
	t.Helper()
	for _, e := range r.ofType(EventAgentStarted) {
		var d AgentStarted
		_ = json.Unmarshal(e.Data, &d)
		if d.Agent.Name == name {
			return d.Agent
		}
	}
	t.Fatalf("no agent named %s", name)
	return AgentInfo{}
}

func mustTeam(t *testing.T, ts TeamSpec) *Team {
	t.Helper()
	team, err := BuildTeam(ts)
	if err != nil {
		t.Fatalf("BuildTeam: %v", err)
	}
	return team
}

func runSession(t *testing.T, ts TeamSpec, turns map[string][]fakeTurn, files map[string]string) *run {
	t.Helper()
	team := mustTeam(t, ts)
	m := &fakeModel{turns: turns}
	r := &run{model: m, log: &bytes.Buffer{}}
	var mu sync.Mutex
	eng := New(Config{SessionID: "s1", Team: team, Model: m, Counter: wordCounter{}, Files: files,
		Logger: slog.New(slog.NewTextHandler(r.log, nil)),
		Sink: SinkFunc(func(e Event) {
			mu.Lock()
			defer mu.Unlock()
			if e.Seq > 0 {
				if err := e.Encode(); err != nil {
					panic(err)
				}
				r.events = append(r.events, e)
			}
		})})
	r.res = eng.Run(context.Background(), "the user's question")
	return r
}
