package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
)

// Whole sessions through the real engine, with the fake server standing in
// for the model: it decides each answer from the request alone (whose
// system prompt, how far the agent has got), as a real endpoint would.

// wordCounter counts words: the engine needs a Counter, not a real one.
type wordCounter struct{}

func (wordCounter) Count(s string) int { return len(strings.Fields(s)) }

// session is a finished run and its events.
type session struct {
	res    *delegation.Result
	mu     sync.Mutex
	events []delegation.Event
	deltas map[string]int // streamed model.delta events per agent
}

func runSession(t *testing.T, ts delegation.TeamSpec, m *Model, prompt string) *session {
	t.Helper()
	team, err := delegation.BuildTeam(ts)
	if err != nil {
		t.Fatalf("BuildTeam: %v", err)
	}
	s := &session{deltas: map[string]int{}}
	eng := delegation.New(delegation.Config{SessionID: "s1", Team: team, Model: m, Counter: wordCounter{},
		Sink: delegation.SinkFunc(func(e delegation.Event) {
			s.mu.Lock()
			defer s.mu.Unlock()
			if e.Seq == 0 {
				s.deltas[e.AgentID]++
				return
			}
			_ = e.Encode()
			s.events = append(s.events, e)
		})})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.res = eng.Run(ctx, prompt)
	return s
}

func (s *session) ofType(typ delegation.EventType) []delegation.Event {
	var out []delegation.Event
	for _, e := range s.events {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// messages is an agent's message list, from its message.added events.
func (s *session) messages(t *testing.T, agentID string) []delegation.Message {
	t.Helper()
	var out []delegation.Message
	for _, e := range s.ofType(delegation.EventMessageAdded) {
		if e.AgentID != agentID {
			continue
		}
		var d delegation.MessageAdded
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		if d.Index != len(out) {
			t.Fatalf("agent %s: message index %d after %d messages", agentID, d.Index, len(out))
		}
		out = append(out, *d.Message)
	}
	return out
}

// shape is a message list as "role/kind" strings.
func shape(msgs []delegation.Message) []string {
	var out []string
	for _, m := range msgs {
		s := string(m.Role)
		if m.Kind != "" {
			s += "/" + string(m.Kind)
		}
		if m.IsError {
			s += "!"
		}
		out = append(out, s)
	}
	return out
}

// agents maps each child's task call id to its AgentInfo.
func (s *session) agents(t *testing.T) map[string]delegation.AgentInfo {
	out := map[string]delegation.AgentInfo{}
	for _, e := range s.ofType(delegation.EventAgentStarted) {
		var d delegation.AgentStarted
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		out[d.Agent.TaskCallID] = d.Agent
	}
	return out
}

func (s *session) delegationsFinished(t *testing.T) []delegation.DelegationFinished {
	var out []delegation.DelegationFinished
	for _, e := range s.ofType(delegation.EventDelegationFinished) {
		var d delegation.DelegationFinished
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

func taskCall(id, desc, typ string) tcall {
	b, _ := json.Marshal(map[string]string{"description": desc, "subagent_type": typ})
	return tcall{id: id, name: "task", args: string(b)}
}

// toolResult is the text of the tool message answering call id.
func toolResult(b wireBody, id string) string {
	for _, m := range b.Messages {
		if m.Role == "tool" && m.ToolCallID == id {
			return m.text()
		}
	}
	return "<no result for " + id + ">"
}

func unexpected(t *testing.T, w http.ResponseWriter, req *wireReq) {
	t.Errorf("unexpected request: %s", req.Raw)
	apiError(w, 400, nil, "test", "unexpected request")
}

func sessionModel(t *testing.T, url string, stream bool, mod func(*Config)) *Model {
	return newModel(t, url, func(c *Config) {
		c.NoStream = !stream
		if mod != nil {
			mod(c)
		}
	})
}

func TestSessionIsolatedAndFork(t *testing.T) {
	const (
		lead       = "You are the lead."
		researcher = "You are the researcher."
		reporter   = "You report facts."
		skyTask    = "Find the colour of the sky. Reply with one word."
		orderTask  = "Report the order number."
	)
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
				b := req.Body
				switch sys := b.system(); {
				case strings.Contains(sys, reporter): // the fork: the lead's prompt, then its own
					if b.contains("A-7731") {
						reply(w, req, turn{content: "A-7731"})
					} else {
						reply(w, req, turn{content: "I see no order number."})
					}
				case sys == researcher:
					reply(w, req, turn{content: "Blue.", usage: [2]int{40, 2}})
				case sys == lead:
					switch b.assistants() {
					case 0:
						reply(w, req, turn{calls: []tcall{{"w1", "write_file", `{"file_path":"/order.md","content":"Order A-7731"}`}}})
					case 1:
						reply(w, req, turn{calls: []tcall{taskCall("t1", skyTask, "researcher")}})
					case 2:
						reply(w, req, turn{calls: []tcall{taskCall("t2", orderTask, "reporter")}})
					default:
						reply(w, req, turn{content: "Done: " + toolResult(b, "t1") + " / " + toolResult(b, "t2")})
					}
				default:
					unexpected(t, w, req)
				}
			})
			ts := delegation.TeamSpec{
				Main: delegation.MainSpec{SystemPrompt: lead},
				Subagents: []delegation.Spec{
					{Name: "researcher", Description: "Researches a question.", SystemPrompt: researcher},
					{Name: "reporter", Description: "Reports facts.", SystemPrompt: reporter, Mode: delegation.ModeFork},
				},
			}
			s := runSession(t, ts, sessionModel(t, f.url(), stream, nil), "Note the order number, then ask around.")
			if s.res.Status != delegation.StatusDone || s.res.Answer != "Done: Blue. / A-7731" {
				t.Fatalf("result %+v", s.res)
			}

			var mainReqs, isoReqs, forkReqs []*wireReq
			for _, r := range f.requests() {
				switch sys := r.Body.system(); {
				case strings.Contains(sys, reporter):
					forkReqs = append(forkReqs, r)
				case sys == researcher:
					isoReqs = append(isoReqs, r)
				default:
					mainReqs = append(mainReqs, r)
				}
			}
			if len(mainReqs) != 4 || len(isoReqs) != 1 || len(forkReqs) != 1 {
				t.Fatalf("requests: main %d, isolated %d, fork %d", len(mainReqs), len(isoReqs), len(forkReqs))
			}

			// The isolated child: its own prompt, one user message holding
			// the description, its tools without task.
			iso := isoReqs[0].Body
			if len(iso.Messages) != 2 || iso.Messages[1].Role != "user" || iso.Messages[1].text() != skyTask {
				t.Errorf("isolated child's first request: %s", isoReqs[0].Raw)
			}
			if iso.hasTool("task") || !reflect.DeepEqual(iso.toolNames(),
				[]string{"ls", "read_file", "write_file", "edit_file", "delete", "glob", "grep"}) {
				t.Errorf("isolated child's tools %v", iso.toolNames())
			}

			// The fork child: the lead's prompt and its own, the lead's
			// messages up to (not including) the call that started it, the
			// preamble with the task, and the lead's tools, task included,
			// byte for byte.
			fork, parent := forkReqs[0].Body, mainReqs[2].Body
			if fork.system() != lead+"\n\n"+reporter {
				t.Errorf("fork system %q", fork.system())
			}
			if len(fork.Messages) != len(parent.Messages)+1 {
				t.Fatalf("fork has %d messages, the lead had %d: %s", len(fork.Messages), len(parent.Messages), forkReqs[0].Raw)
			}
			for i := 1; i < len(parent.Messages); i++ {
				if a, b := mustJSON(t, fork.Messages[i]), mustJSON(t, parent.Messages[i]); a != b {
					t.Errorf("fork message %d differs from the lead's:\n%s\n%s", i, a, b)
				}
			}
			if l := fork.last(); l.Role != "user" || l.text() != delegation.ForkPreamble+orderTask {
				t.Errorf("fork's last message %+v", l)
			}
			if mustJSON(t, fork.Tools) != mustJSON(t, parent.Tools) || !fork.hasTool("task") {
				t.Errorf("fork tools differ from the lead's: %v vs %v", fork.toolNames(), parent.toolNames())
			}

			// The receipts reached the lead, tied to the task calls.
			final := mainReqs[3].Body
			if toolResult(final, "t1") != "Blue." || toolResult(final, "t2") != "A-7731" {
				t.Errorf("receipts in the lead's last request: %s", mainReqs[3].Raw)
			}

			// The trace's shape, from the events.
			agents := s.agents(t)
			isoID, forkID := agents["t1"].ID, agents["t2"].ID
			if got := shape(s.messages(t, "main")); !reflect.DeepEqual(got, []string{"user/prompt", "assistant", "tool",
				"assistant", "tool/receipt", "assistant", "tool/receipt", "assistant"}) {
				t.Errorf("main's messages %v", got)
			}
			if got := shape(s.messages(t, isoID)); !reflect.DeepEqual(got, []string{"user/task", "assistant"}) {
				t.Errorf("isolated child's messages %v", got)
			}
			if got := shape(s.messages(t, forkID)); !reflect.DeepEqual(got, []string{"user/fork_preamble", "assistant"}) {
				t.Errorf("fork child's messages %v", got)
			}
			if agents["t1"].Mode != delegation.ModeIsolated || agents["t2"].Mode != delegation.ModeFork {
				t.Errorf("modes %v %v", agents["t1"].Mode, agents["t2"].Mode)
			}
			df := s.delegationsFinished(t)
			if len(df) != 2 || df[0].IsError || df[1].IsError || df[0].ToolCallID != "t1" || df[1].ToolCallID != "t2" {
				t.Errorf("delegation.finished %+v", df)
			}
			// Usage from the endpoint is recorded with the model call.
			var usage []*delegation.Usage
			for _, e := range s.ofType(delegation.EventModelFinished) {
				var d delegation.ModelFinished
				_ = json.Unmarshal(e.Data, &d)
				if e.AgentID == isoID {
					usage = append(usage, d.Usage)
				}
			}
			if len(usage) != 1 || usage[0] == nil || *usage[0] != (delegation.Usage{PromptTokens: 40, CompletionTokens: 2}) {
				t.Errorf("the isolated child's model.finished usage %+v", usage)
			}
			s.mu.Lock()
			deltas := s.deltas[isoID]
			s.mu.Unlock()
			if stream && deltas == 0 {
				t.Error("streamed text did not reach the live events")
			}
			if !stream && deltas != 0 {
				t.Errorf("%d deltas without streaming", deltas)
			}
		})
	}
}

func TestSessionFanOut(t *testing.T) {
	var inFlight, maxInFlight atomic.Int32
	delays := map[string]time.Duration{"job A": 150 * time.Millisecond, "job B": 75 * time.Millisecond, "job C": 0}
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
		b := req.Body
		if b.system() == delegation.GeneralPurpose.SystemPrompt {
			job := b.last().text()
			n := inFlight.Add(1)
			for {
				m := maxInFlight.Load()
				if n <= m || maxInFlight.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(delays[job])
			inFlight.Add(-1)
			reply(w, req, turn{content: "result of " + job})
			return
		}
		switch b.assistants() {
		case 0:
			reply(w, req, turn{calls: []tcall{
				taskCall("f1", "job A", "general-purpose"),
				taskCall("f2", "job B", "general-purpose"),
				taskCall("f3", "job C", "general-purpose"),
			}})
		case 1:
			reply(w, req, turn{content: "collected"})
		default:
			unexpected(t, w, req)
		}
	})
	s := runSession(t, delegation.TeamSpec{}, sessionModel(t, f.url(), true, nil), "Do three jobs.")
	if s.res.Status != delegation.StatusDone || s.res.Answer != "collected" {
		t.Fatalf("result %+v", s.res)
	}
	if maxInFlight.Load() < 2 {
		t.Errorf("the three children did not run at once (at most %d in flight)", maxInFlight.Load())
	}
	// Results in call order, although job C finished first and A last.
	var last *wireReq
	for _, r := range f.requests() {
		if r.Body.system() != delegation.GeneralPurpose.SystemPrompt && r.Body.assistants() == 1 {
			last = r
		}
	}
	if last == nil {
		t.Fatal("no second request of the main agent")
	}
	var results []string
	for _, m := range last.Body.Messages {
		if m.Role == "tool" {
			results = append(results, m.ToolCallID+"="+m.text())
		}
	}
	if want := []string{"f1=result of job A", "f2=result of job B", "f3=result of job C"}; !reflect.DeepEqual(results, want) {
		t.Errorf("results %v, want %v", results, want)
	}
	if got := shape(s.messages(t, "main")); !reflect.DeepEqual(got, []string{"user/prompt", "assistant",
		"tool/receipt", "tool/receipt", "tool/receipt", "assistant"}) {
		t.Errorf("main's messages %v", got)
	}
	var order []string
	for _, d := range s.delegationsFinished(t) {
		order = append(order, d.ToolCallID)
	}
	if !reflect.DeepEqual(order, []string{"f1", "f2", "f3"}) {
		t.Errorf("delegation.finished order %v", order)
	}
	agents := s.agents(t)
	for i, id := range []string{"f1", "f2", "f3"} {
		if agents[id].Invocation != i {
			t.Errorf("%s: invocation %d, want %d (numbered in call order)", id, agents[id].Invocation, i)
		}
	}
}

func TestSessionFailingChild(t *testing.T) {
	var doomed atomic.Int32
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
		b := req.Body
		if b.system() == delegation.GeneralPurpose.SystemPrompt {
			if strings.Contains(b.last().text(), "doomed") {
				doomed.Add(1)
				apiError(w, 500, nil, "server_error", "The server had an error while processing your request.")
				return
			}
			reply(w, req, turn{content: "fine result"})
			return
		}
		switch b.assistants() {
		case 0:
			reply(w, req, turn{calls: []tcall{
				taskCall("d1", "The doomed job.", "general-purpose"),
				taskCall("d2", "The fine job.", "general-purpose"),
			}})
		case 1:
			reply(w, req, turn{content: "One job failed: " + toolResult(b, "d1")})
		default:
			unexpected(t, w, req)
		}
	})
	m := sessionModel(t, f.url(), true, func(c *Config) { c.MaxRetries = 1 })
	s := runSession(t, delegation.TeamSpec{}, m, "Do two jobs.")
	if s.res.Status != delegation.StatusDone {
		t.Fatalf("a child's failure must not fail the session: %+v", s.res)
	}
	if doomed.Load() != 2 {
		t.Errorf("the failing child's model was called %d times, want 2 (MaxRetries 1)", doomed.Load())
	}
	for _, want := range []string{"Subagent 'general-purpose' failed", "failed 2 attempts in a row", "500 Internal Server Error"} {
		if !strings.Contains(s.res.Answer, want) {
			t.Errorf("the error receipt the parent saw lacks %q: %s", want, s.res.Answer)
		}
	}
	if strings.Contains(s.res.Answer, testKey) {
		t.Error("the key leaked into a receipt")
	}
	if got := shape(s.messages(t, "main")); !reflect.DeepEqual(got, []string{"user/prompt", "assistant",
		"tool/receipt!", "tool/receipt", "assistant"}) {
		t.Errorf("main's messages %v", got)
	}
	df := s.delegationsFinished(t)
	if len(df) != 2 || !df[0].IsError || df[1].IsError {
		t.Errorf("delegation.finished %+v", df)
	}
	agents := s.agents(t)
	var failed []string
	for _, e := range s.ofType(delegation.EventAgentFinished) {
		var d delegation.AgentFinished
		_ = json.Unmarshal(e.Data, &d)
		if d.Status == delegation.StatusFailed {
			failed = append(failed, e.AgentID)
			if !strings.Contains(d.Error, "model error: the model endpoint at") {
				t.Errorf("agent.finished error %q", d.Error)
			}
		}
	}
	if !reflect.DeepEqual(failed, []string{agents["d1"].ID}) {
		t.Errorf("failed agents %v, want only the doomed child %s", failed, agents["d1"].ID)
	}
	var fin delegation.SessionFinished
	ends := s.ofType(delegation.EventSessionFinished)
	if len(ends) != 1 || json.Unmarshal(ends[0].Data, &fin) != nil || fin.Status != delegation.StatusDone {
		t.Errorf("session.finished %+v", ends)
	}
}

func TestSessionMalformedArguments(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
		switch req.Body.assistants() {
		case 0:
			reply(w, req, turn{calls: []tcall{{"r1", "read_file", `{"file_path": `}}})
		default:
			reply(w, req, turn{content: "The tool said: " + toolResult(req.Body, "r1")})
		}
	})
	s := runSession(t, delegation.TeamSpec{}, sessionModel(t, f.url(), true, nil), "Read a file.")
	if s.res.Status != delegation.StatusDone || !strings.Contains(s.res.Answer, "Invalid arguments for read_file") {
		t.Fatalf("result %+v", s.res)
	}
	msgs := s.messages(t, "main")
	if got := shape(msgs); !reflect.DeepEqual(got, []string{"user/prompt", "assistant", "tool!", "assistant"}) {
		t.Fatalf("main's messages %v", got)
	}
	if string(msgs[1].ToolCalls[0].Args) != `"{\"file_path\": "` {
		t.Errorf("args kept as %s", msgs[1].ToolCalls[0].Args)
	}
	// The call went back to the endpoint with arguments that are JSON.
	sent := f.requests()[1].Body.Messages
	if len(sent) != 3 || sent[1].Role != "assistant" || len(sent[1].ToolCalls) != 1 {
		t.Fatalf("second request: %s", f.requests()[1].Raw)
	}
	if back := sent[1].ToolCalls[0].Function.Arguments; !json.Valid([]byte(back)) {
		t.Errorf("arguments sent back %q", back)
	}
}

func TestSessionNativeJSONSchema(t *testing.T) {
	schema := json.RawMessage(`{"title":"Verdict","type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`)
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
		b := req.Body
		if b.system() == "Judge." {
			if b.assistants() == 0 {
				reply(w, req, turn{content: `{"ok": "yes"}`}) // fails the schema
				return
			}
			reply(w, req, turn{content: "```json\n{\"ok\": true}\n```"})
			return
		}
		switch b.assistants() {
		case 0:
			reply(w, req, turn{calls: []tcall{taskCall("j1", "Judge the plan.", "judge")}})
		default:
			reply(w, req, turn{content: "Verdict: " + toolResult(b, "j1")})
		}
	})
	ts := delegation.TeamSpec{Subagents: []delegation.Spec{{Name: "judge", Description: "Judges.", SystemPrompt: "Judge.",
		ResponseFormat: schema}}}
	m := sessionModel(t, f.url(), true, func(c *Config) { c.NativeJSONSchema = true })
	s := runSession(t, ts, m, "Is the plan fine?")
	if s.res.Status != delegation.StatusDone || s.res.Answer != `Verdict: {"ok":true}` {
		t.Fatalf("result %+v", s.res)
	}
	var judge []*wireReq
	for _, r := range f.requests() {
		if r.Body.system() == "Judge." {
			judge = append(judge, r)
		}
	}
	if len(judge) != 2 {
		t.Fatalf("%d judge requests", len(judge))
	}
	for _, r := range judge {
		if r.Body.hasTool("Verdict") || !strings.Contains(string(r.Body.ResponseFormat), `"json_schema"`) {
			t.Errorf("judge request %s", r.Raw)
		}
	}
	// The second try saw why the first was refused.
	if l := judge[1].Body.last(); l.Role != "user" || !strings.Contains(l.text(), "/ok") {
		t.Errorf("the judge's retry ends with %+v", l)
	}
	agents := s.agents(t)
	if got := shape(s.messages(t, agents["j1"].ID)); !reflect.DeepEqual(got, []string{"user/task", "assistant", "tool!", "assistant", "tool"}) {
		t.Errorf("judge's messages %v", got)
	}
}
