package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/model/scripted"
	"github.com/delegationstudio/studio/internal/scenario"
)

// ScriptUpstream answers from a scenario's script, keyed by the inferred
// agent: the main agent plays script.main, a child the list of its
// subagent type and invocation (formats.md §1), exactly as in our engine.
// A real framework is then driven deterministically, offline and without
// a key, and the same scenario run through our engine shows in compare
// where the two differ.
type ScriptUpstream struct {
	label   string // what the scenario was given as: a file, lesson:NAME
	sc      *scenario.Scenario
	counter delegation.Counter
	now     func() time.Time

	mu     sync.Mutex
	models map[string]*scripted.Model // by session: each holds its agents' places
}

// NewScriptUpstream plays sc's script; label says where it came from.
func NewScriptUpstream(sc *scenario.Scenario, label string) (*ScriptUpstream, error) {
	if sc.Script == nil {
		return nil, fmt.Errorf("%s has no script to answer from: give a scenario with a \"script\"", label)
	}
	return &ScriptUpstream{label: label, sc: sc, counter: sc.Counter, now: time.Now, models: map[string]*scripted.Model{}}, nil
}

func (u *ScriptUpstream) String() string { return "script:" + u.label }

// Modes are the modes of the scenario's subagents: they tell apart two task
// calls with one description (ingest.Config.Modes).
func (u *ScriptUpstream) Modes() map[string]delegation.Mode {
	modes := map[string]delegation.Mode{}
	for _, s := range u.sc.Team.Subagents {
		modes[s.Name] = s.Mode
	}
	return modes
}

// modesOf asks an upstream for its team's modes, when it knows them.
func modesOf(u Upstream) map[string]delegation.Mode {
	if m, ok := u.(interface {
		Modes() map[string]delegation.Mode
	}); ok {
		return m.Modes()
	}
	return nil
}

// Forget drops a session's places in the script once it has ended.
func (u *ScriptUpstream) Forget(sessionID string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.models, sessionID)
}

func (u *ScriptUpstream) model(sessionID string) *scripted.Model {
	u.mu.Lock()
	defer u.mu.Unlock()
	m := u.models[sessionID]
	if m == nil {
		m = scripted.New(u.sc.Script)
		u.models[sessionID] = m
	}
	return m
}

// play plays the calling agent's next turn of the script, whatever the
// wire: stream, when set, is given the text as it is played, across the
// turn's delay_ms, as in our engine. The answer's usage is the studio's own
// count. A nil answer with no error: the context ended.
func (u *ScriptUpstream) play(ctx context.Context, x *Exchange, stream func(string)) (*delegation.Response, *Error) {
	ref := x.Agent
	if ref.Unattached {
		return nil, &Error{Status: http.StatusBadRequest, Code: "script_mismatch", Message: fmt.Sprintf(
			"The script of %s cannot answer this request: it continues no agent's conversation and opens no task the agents "+
				"are waiting on, so it is recorded as agent %s, unattached, and no turn of the script is its.", u.label, ref.ID)}
	}
	in := x.Request.Call(time.Time{})
	req := &delegation.Request{Caller: delegation.Caller{AgentID: ref.ID, Name: ref.Name, Invocation: ref.Invocation},
		Purpose: delegation.PurposeTurn, Model: x.Request.Model, System: in.System, Tools: in.Tools, Stream: stream}
	for _, m := range in.Input {
		req.Messages = append(req.Messages, &delegation.Message{Role: m.Role, Content: m.Content, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID})
	}
	resp, err := u.model(x.SessionID).Generate(ctx, req)
	if err != nil {
		var te *scripted.TurnError
		switch {
		case errors.As(err, &te):
			return nil, &Error{Status: http.StatusBadRequest, Code: "script_mismatch", Message: te.Message}
		case ctx.Err() != nil:
			return nil, nil
		}
		return nil, &Error{Status: http.StatusInternalServerError, Message: err.Error()}
	}
	msg := &delegation.Message{Role: delegation.RoleAssistant, Content: resp.Content, ToolCalls: resp.ToolCalls}
	resp.Usage = &delegation.Usage{PromptTokens: x.Turn.InputTokens(), CompletionTokens: delegation.MessageTokens(u.counter, msg)}
	return resp, nil
}

// Chat plays the calling agent's next turn, streamed or whole as asked.
func (u *ScriptUpstream) Chat(ctx context.Context, x *Exchange, out *Reply) {
	if err := x.Request.CheckSequence(); err != nil {
		out.Refuse(err)
		return
	}
	w := &chunkWriter{id: "chatcmpl-" + strings.ReplaceAll(x.Turn.CallID(), ".", "-") + "-" + shortID(x.SessionID),
		model: x.Request.Model, created: u.now().Unix(), out: out}
	var stream func(string)
	if x.Request.Stream {
		stream = func(delta string) {
			w.delta(wireMessage{Content: &delta})
			x.Turn.Delta(delta)
		}
	}
	resp, err := u.play(ctx, x, stream)
	if err != nil {
		out.Refuse(err)
		return
	}
	if resp == nil {
		return // the client left, or the studio stops: Reply.close says so
	}
	finish := "stop"
	if len(resp.ToolCalls) > 0 {
		finish = "tool_calls"
	}
	usage := &wireUsage{Prompt: resp.Usage.PromptTokens, Completion: resp.Usage.CompletionTokens,
		Total: resp.Usage.PromptTokens + resp.Usage.CompletionTokens}
	calls := make([]wireCall, len(resp.ToolCalls))
	for i, c := range resp.ToolCalls {
		calls[i] = wireCall{ID: c.ID, Type: "function", Function: wireFunction{Name: c.Name, Arguments: string(c.Args)}}
	}
	if !x.Request.Stream {
		m := wireMessage{Role: "assistant", ToolCalls: calls}
		if resp.Content != "" || len(calls) == 0 {
			m.Content = &resp.Content
		}
		body, _ := json.Marshal(wireCompletion{ID: w.id, Object: "chat.completion", Created: w.created, Model: w.model,
			Choices: []wireChoice{{Message: &m, FinishReason: &finish}}, Usage: usage})
		out.RecordAnswer(resp)
		out.Raw(http.StatusOK, "application/json", body)
		return
	}
	if resp.Content != "" && !w.sentText {
		w.delta(wireMessage{Content: &resp.Content})
	}
	if len(calls) > 0 {
		for i := range calls {
			calls[i].Index = &i
		}
		w.delta(wireMessage{ToolCalls: calls})
	}
	if !w.started {
		w.delta(wireMessage{})
	}
	w.chunk([]wireChoice{{Delta: &wireMessage{}, FinishReason: &finish}}, nil)
	if x.Request.IncludeUsage {
		w.chunk([]wireChoice{}, usage)
	}
	out.RecordAnswer(resp)
	out.Raw(http.StatusOK, "text/event-stream", []byte("data: [DONE]\n\n"))
}

// The chat-completions answer as OpenAI writes it, for the scripted
// upstream: a content of null beside tool calls, no fields of other
// vendors'.
type (
	wireCompletion struct {
		ID      string       `json:"id"`
		Object  string       `json:"object"`
		Created int64        `json:"created"`
		Model   string       `json:"model"`
		Choices []wireChoice `json:"choices"`
		Usage   *wireUsage   `json:"usage,omitempty"`
	}
	wireChoice struct {
		Index        int          `json:"index"`
		Message      *wireMessage `json:"message,omitempty"`
		Delta        *wireMessage `json:"delta,omitempty"`
		FinishReason *string      `json:"finish_reason"`
	}
	wireMessage struct {
		Role      string     `json:"role,omitempty"`
		Content   *string    `json:"content,omitempty"`
		ToolCalls []wireCall `json:"tool_calls,omitempty"`
	}
	wireCall struct {
		Index    *int         `json:"index,omitempty"`
		ID       string       `json:"id"`
		Type     string       `json:"type"`
		Function wireFunction `json:"function"`
	}
	wireFunction struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	wireUsage struct {
		Prompt     int `json:"prompt_tokens"`
		Completion int `json:"completion_tokens"`
		Total      int `json:"total_tokens"`
	}
)

// chunkWriter writes a scripted answer as chat.completion.chunk events.
type chunkWriter struct {
	id, model string
	created   int64
	out       *Reply
	started   bool // the first chunk (with the role) went out
	sentText  bool
}

func (w *chunkWriter) delta(d wireMessage) {
	if !w.started {
		d.Role = "assistant"
		w.started = true
	}
	if d.Content != nil && *d.Content != "" {
		w.sentText = true
	}
	w.chunk([]wireChoice{{Delta: &d}}, nil)
}

func (w *chunkWriter) chunk(choices []wireChoice, usage *wireUsage) {
	b, _ := json.Marshal(wireCompletion{ID: w.id, Object: "chat.completion.chunk", Created: w.created,
		Model: w.model, Choices: choices, Usage: usage})
	w.out.Raw(http.StatusOK, "text/event-stream", append(append([]byte("data: "), b...), '\n', '\n'))
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// Models lists the one model the script plays, under any name asked for.
func (u *ScriptUpstream) Models(_ context.Context, _ http.Header, id string, w http.ResponseWriter) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	m := model{ID: "scripted", Object: "model", OwnedBy: "delegation-studio"}
	var body any = map[string]any{"object": "list", "data": []model{m}}
	if id != "" {
		m.ID = id // the script answers whatever model is named
		body = m
	}
	b, _ := json.Marshal(body)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
