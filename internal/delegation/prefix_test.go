package delegation

import (
	"encoding/json"
	"math"
	"testing"
)

// handRequest is a request built by hand: its tools, system prompt and
// messages, each message on a list of its own agent.
type handRequest struct {
	tools  []ToolDef
	system string
	msgs   []*Message
}

// lists holds hand-built messages by agent and place, with their tokens.
type lists map[string][]*Message

func (l lists) message(agentID string, idx int) (PrefixKey, int) {
	m := l[agentID][idx]
	return MessageKey(m), m.Tokens
}

// add puts a request's messages on agent id's list (reusing the same
// places when they are already there) and returns it as a PrefixRequest.
func (l lists) request(id string, r handRequest) PrefixRequest {
	l[id] = r.msgs
	req := PrefixRequest{Tools: ToolsKey(r.tools), System: SystemKey(r.system), Message: l.message}
	for _, t := range r.tools {
		req.ToolTokens += len(ToolJSON(t))
	}
	req.SystemTokens = len(r.system)
	req.Tokens = req.ToolTokens + req.SystemTokens
	for _, m := range r.msgs {
		req.Tokens += m.Tokens
	}
	if len(r.msgs) > 0 {
		req.Context = []Range{{AgentID: id, From: 0, To: len(r.msgs)}}
	}
	return req
}

func msg(role Role, text string) *Message {
	return &Message{Role: role, Content: text, Tokens: len(text)}
}

var (
	lsTool   = ToolDef{Name: "ls", Description: "list", Parameters: json.RawMessage(`{"type":"object"}`)}
	readTool = ToolDef{Name: "read_file", Description: "read", Parameters: json.RawMessage(`{"type":"object"}`)}
)

func TestCachedPrefixOfHandBuiltRequests(t *testing.T) {
	base := handRequest{tools: []ToolDef{lsTool, readTool}, system: "You are helpful.",
		msgs: []*Message{msg(RoleUser, "find the order"), msg(RoleAssistant, "looking"), msg(RoleUser, "thanks")}}
	toolTokens := len(ToolJSON(lsTool)) + len(ToolJSON(readTool))
	all := toolTokens + len(base.system) + len("find the order") + len("looking") + len("thanks")

	cases := []struct {
		name   string
		second handRequest
		want   int
	}{
		{"identical: all of it is cached", base, all},
		{"diverging at the tools: nothing is", handRequest{tools: []ToolDef{readTool, lsTool}, system: base.system, msgs: base.msgs}, 0},
		{"one tool fewer: the tool block differs, nothing is", handRequest{tools: []ToolDef{lsTool}, system: base.system, msgs: base.msgs}, 0},
		{"diverging at the system prompt: the tools are", handRequest{tools: base.tools, system: "You are terse.", msgs: base.msgs}, toolTokens},
		{"diverging at the second message: tools, system and the first message are",
			handRequest{tools: base.tools, system: base.system, msgs: []*Message{msg(RoleUser, "find the order"), msg(RoleAssistant, "found it"), msg(RoleUser, "thanks")}},
			toolTokens + len(base.system) + len("find the order")},
		{"the same text in another role differs",
			handRequest{tools: base.tools, system: base.system, msgs: []*Message{msg(RoleAssistant, "find the order")}},
			toolTokens + len(base.system)},
		{"extending it: all of the first is cached, the rest is new",
			handRequest{tools: base.tools, system: base.system, msgs: append(append([]*Message(nil), base.msgs...), msg(RoleAssistant, "you are welcome"))}, all},
		{"a prefix of it: all cached", handRequest{tools: base.tools, system: base.system, msgs: base.msgs[:1]},
			toolTokens + len(base.system) + len("find the order")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var x PrefixIndex
			l := lists{}
			if got, _ := x.Add(l.request("a", base)); got != 0 {
				t.Fatalf("the first request ever has %d cached tokens, want 0", got)
			}
			// The second request is another agent's: compared by content,
			// walked from the root.
			got, _ := x.Add(l.request("b", c.second))
			if got != c.want {
				t.Fatalf("cached = %d, want %d", got, c.want)
			}
		})
	}

	t.Run("a request walked from the mark of the one it extends gets the same answer", func(t *testing.T) {
		var x PrefixIndex
		l := lists{}
		_, mark := x.Add(l.request("a", handRequest{tools: base.tools, system: base.system, msgs: base.msgs[:2]}))
		got, _ := x.Add(l.request("a", base), mark)
		if want := all - len("thanks"); got != want {
			t.Fatalf("cached = %d, want %d", got, want)
		}
	})
	t.Run("the longest of several earlier requests counts", func(t *testing.T) {
		var x PrefixIndex
		l := lists{}
		x.Add(l.request("a", handRequest{tools: base.tools, system: base.system, msgs: base.msgs[:1]}))
		x.Add(l.request("b", handRequest{tools: base.tools, system: base.system, msgs: base.msgs[:2]}))
		x.Add(l.request("c", handRequest{tools: base.tools, system: "other"}))
		got, _ := x.Add(l.request("d", base))
		if want := all - len("thanks"); got != want {
			t.Fatalf("cached = %d, want %d", got, want)
		}
	})
}

func TestCachedPrefixOfChildren(t *testing.T) {
	turns := func(child string) map[string][]fakeTurn {
		return map[string][]fakeTurn{
			"main":            {{calls: []ToolCall{call("write_file", map[string]string{"file_path": "/o.md", "content": "A-7731"})}}, {calls: []ToolCall{task("Report the order number.", child)}}, {content: "done"}},
			child + "#0":      {{calls: []ToolCall{call("read_file", map[string]string{"file_path": "/o.md"})}}, {content: "A-7731"}},
			child + "#1":      {{content: "again"}},
			"general-purpose": nil,
		}
	}
	first := func(r *run, name string) (ModelCall, ModelCall) {
		a := r.childByName(t, name)
		cs := r.modelCalls(a.ID)
		return cs[0], cs[1]
	}
	mainCalls := func(r *run) []ModelCall { return r.modelCalls("main") }

	t.Run("a fork's first call shares its parent's whole last request", func(t *testing.T) {
		r := runSession(t, TeamSpec{Subagents: []Spec{{Name: "fk", Description: "d", Mode: ModeFork}}}, turns("fk"), nil)
		c0, c1 := first(r, "fk")
		parent := mainCalls(r)[1]
		if c0.CachedPrefixTokens != parent.InputTokens {
			t.Fatalf("cached = %d, want the parent's last input %d", c0.CachedPrefixTokens, parent.InputTokens)
		}
		if c0.InputTokens-c0.CachedPrefixTokens != r.messages(c0.AgentID)[0].Tokens {
			t.Fatalf("new tokens = %d, want the preamble's %d", c0.InputTokens-c0.CachedPrefixTokens, r.messages(c0.AgentID)[0].Tokens)
		}
		if c1.CachedPrefixTokens != c0.InputTokens {
			t.Fatalf("its second call caches %d, want its first input %d", c1.CachedPrefixTokens, c0.InputTokens)
		}
	})
	t.Run("an isolated child's first call shares nothing with its parent", func(t *testing.T) {
		r := runSession(t, TeamSpec{Subagents: []Spec{{Name: "iso", Description: "d"}}}, turns("iso"), nil)
		c0, c1 := first(r, "iso")
		if c0.CachedPrefixTokens != 0 {
			t.Fatalf("cached = %d, want 0", c0.CachedPrefixTokens)
		}
		if c1.CachedPrefixTokens != c0.InputTokens {
			t.Fatalf("its second call caches %d, want its first input %d", c1.CachedPrefixTokens, c0.InputTokens)
		}
	})
	t.Run("a fork with tools of its own loses the prefix", func(t *testing.T) {
		r := runSession(t, TeamSpec{Subagents: []Spec{{Name: "fk", Description: "d", Mode: ModeFork, Tools: []string{"read_file", "grep"}}}}, turns("fk"), nil)
		c0, _ := first(r, "fk")
		if c0.CachedPrefixTokens != 0 {
			t.Fatalf("cached = %d, want 0: its tools differ from the first element on", c0.CachedPrefixTokens)
		}
	})
	t.Run("a fork with a system prompt of its own keeps only the tools", func(t *testing.T) {
		r := runSession(t, TeamSpec{Subagents: []Spec{{Name: "fk", Description: "d", Mode: ModeFork, SystemPrompt: "Be brief."}}}, turns("fk"), nil)
		c0, _ := first(r, "fk")
		if c0.CachedPrefixTokens != c0.ToolTokens {
			t.Fatalf("cached = %d, want the tools' %d", c0.CachedPrefixTokens, c0.ToolTokens)
		}
	})
	t.Run("the main agent's calls each cache the one before", func(t *testing.T) {
		r := runSession(t, TeamSpec{Subagents: []Spec{{Name: "iso", Description: "d"}}}, turns("iso"), nil)
		cs := mainCalls(r)
		if cs[0].CachedPrefixTokens != 0 {
			t.Fatalf("first call cached %d", cs[0].CachedPrefixTokens)
		}
		for i := 1; i < len(cs); i++ {
			if cs[i].CachedPrefixTokens != cs[i-1].InputTokens {
				t.Fatalf("call %d caches %d, want %d", i, cs[i].CachedPrefixTokens, cs[i-1].InputTokens)
			}
		}
	})
	t.Run("a second isolated child of the same type shares the first's tools and system prompt", func(t *testing.T) {
		r := runSession(t, TeamSpec{Subagents: []Spec{{Name: "iso", Description: "d", SystemPrompt: "Answer."}}}, map[string][]fakeTurn{
			"main":  {{calls: []ToolCall{task("first job", "iso")}}, {calls: []ToolCall{task("second job", "iso")}}, {content: "done"}},
			"iso#0": {{content: "one"}},
			"iso#1": {{content: "two"}},
		}, nil)
		var second ModelCall
		for _, e := range r.ofType(EventAgentStarted) {
			var d AgentStarted
			_ = json.Unmarshal(e.Data, &d)
			if d.Agent.Name == "iso" && d.Agent.Invocation == 1 {
				second = r.modelCalls(d.Agent.ID)[0]
			}
		}
		if want := second.ToolTokens + second.SystemTokens; second.CachedPrefixTokens != want {
			t.Fatalf("cached = %d, want tools + system %d", second.CachedPrefixTokens, want)
		}
	})
}

func TestSummaryCallIsServedWhole(t *testing.T) {
	r := runSession(t, TeamSpec{Main: MainSpec{Summarization: Summarization{MaxTokens: 2, KeepMessages: 1}}}, map[string][]fakeTurn{
		"main": {{calls: []ToolCall{call("ls", map[string]string{"path": "/"})}}, {calls: []ToolCall{call("ls", map[string]string{"path": "/"})}}, {content: "done"}},
	}, nil)
	for _, c := range r.modelCalls("main") {
		if c.Purpose == PurposeSummary && c.CachedPrefixTokens != c.InputTokens {
			t.Fatalf("summary call %s caches %d of %d: it sends a prefix of the call before", c.ID, c.CachedPrefixTokens, c.InputTokens)
		}
	}
}

func TestCostArithmetic(t *testing.T) {
	p := Price{Input: 2.5, CachedInput: 1.25, Output: 10}
	near := func(t *testing.T, what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-12 {
			t.Errorf("%s = %.10f, want %.10f", what, got, want)
		}
	}
	t.Run("new input, cached input and output at their own prices", func(t *testing.T) {
		c := p.Of(10_000, 6_000, 0, 500, BasisEstimate)
		near(t, "input", c.Input, 4_000*2.5/1e6)
		near(t, "cached", c.CachedInput, 6_000*1.25/1e6)
		near(t, "output", c.Output, 500*10/1e6)
		near(t, "total", c.Total, 0.01+0.0075+0.005)
	})
	t.Run("cached tokens past the input are capped at it", func(t *testing.T) {
		c := p.Of(100, 500, 0, 0, BasisEstimate)
		near(t, "input", c.Input, 0)
		near(t, "cached", c.CachedInput, 100*1.25/1e6)
	})
	t.Run("a call is priced on the endpoint's usage when it reported one", func(t *testing.T) {
		call := ModelCall{InputTokens: 1000, CachedPrefixTokens: 900}
		c := p.CallCost(call, ModelFinished{OutputTokens: 10, Usage: &Usage{PromptTokens: 1200, CompletionTokens: 20, CachedTokens: 1024}})
		if c.Basis != BasisUsage {
			t.Fatalf("basis = %s", c.Basis)
		}
		near(t, "total", c.Total, (176*2.5+1024*1.25+20*10)/1e6)
		e := p.CallCost(call, ModelFinished{OutputTokens: 10})
		if e.Basis != BasisEstimate {
			t.Fatalf("basis = %s", e.Basis)
		}
		near(t, "estimate", e.Total, (100*2.5+900*1.25+10*10)/1e6)
	})
	t.Run("cache writes cost their surcharge where the price has one, else the input price", func(t *testing.T) {
		anth := Price{Input: 3, CachedInput: 0.3, CacheWrite: 3.75, Output: 15}
		u := &Usage{PromptTokens: 10_000, CachedTokens: 2_000, CacheCreationTokens: 5_000, CompletionTokens: 100}
		c := anth.CallCost(ModelCall{}, ModelFinished{Usage: u})
		near(t, "input", c.Input, 3_000*3/1e6)
		near(t, "cached", c.CachedInput, 2_000*0.3/1e6)
		near(t, "written", c.CacheWrite, 5_000*3.75/1e6)
		near(t, "total", c.Total, (3_000*3+2_000*0.3+5_000*3.75+100*15)/1e6)
		plain := p.CallCost(ModelCall{}, ModelFinished{Usage: u})
		near(t, "no surcharge", plain.Total, (8_000*2.5+2_000*1.25+100*10)/1e6)
		near(t, "sums", c.Add(c).CacheWrite, 2*c.CacheWrite)
	})
	t.Run("costs add up, and say when their bases differ", func(t *testing.T) {
		a, b := p.Of(1e6, 0, 0, 0, BasisUsage), p.Of(0, 0, 0, 1e6, BasisEstimate)
		s := a.Add(b)
		near(t, "total", s.Total, 12.5)
		if s.Basis != "mixed" {
			t.Fatalf("basis = %s", s.Basis)
		}
		if got := (Cost{}).Add(a).Basis; got != BasisUsage {
			t.Fatalf("basis = %s", got)
		}
	})
	t.Run("the engine prices each call with the team's price, a subagent's own first", func(t *testing.T) {
		own := &Price{Input: 1, CachedInput: 0.5, Output: 2, Source: "subagent"}
		r := runSession(t, TeamSpec{Main: MainSpec{Pricing: &p}, Subagents: []Spec{{Name: "cheap", Description: "d", Pricing: own}}}, map[string][]fakeTurn{
			"main":    {{calls: []ToolCall{task("t", "cheap")}}, {content: "done"}},
			"cheap#0": {{content: "ok"}},
		}, nil)
		starts := map[string]ModelCall{}
		for _, e := range r.ofType(EventModelStarted) {
			var d ModelStarted
			_ = json.Unmarshal(e.Data, &d)
			starts[d.Call.ID] = d.Call
		}
		cheap := r.childByName(t, "cheap")
		for _, e := range r.ofType(EventModelFinished) {
			var f ModelFinished
			_ = json.Unmarshal(e.Data, &f)
			if f.Cost == nil {
				t.Fatalf("call %s has no cost", f.ModelCallID)
			}
			c := starts[f.ModelCallID]
			price := p
			if c.AgentID == cheap.ID {
				price = *own
			}
			want := price.Of(c.InputTokens, c.CachedPrefixTokens, 0, f.OutputTokens, BasisEstimate)
			near(t, f.ModelCallID, f.Cost.Total, want.Total)
		}
	})
	t.Run("an agent without a price has no cost", func(t *testing.T) {
		r := runSession(t, TeamSpec{}, map[string][]fakeTurn{"main": {{content: "done"}}}, nil)
		for _, e := range r.ofType(EventModelFinished) {
			var f ModelFinished
			_ = json.Unmarshal(e.Data, &f)
			if f.Cost != nil {
				t.Fatalf("cost = %+v", f.Cost)
			}
		}
	})
}
