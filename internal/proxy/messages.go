package proxy

// POST /v1/messages: Anthropic's Messages API on the recording endpoint
// (docs/proxy.md, "Anthropic's Messages API"). A request is read into the
// same Request the chat-completions route reads — the system prompt,
// messages, tool calls and their results, tools — so that sessions are
// chosen, agents inferred and calls recorded exactly as for chat
// completions; the request itself is forwarded as sent, and the answer is
// relayed, and read, in Anthropic's wire format.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/scenario"
)

// MessagesUpstream is an upstream that answers Anthropic Messages requests:
// an Anthropic server (AnthropicUpstream) or a scenario's script.
type MessagesUpstream interface {
	// Messages answers one request, writing the answer to out as it comes
	// (out records it); it returns when the answer is whole or has failed.
	Messages(ctx context.Context, x *Exchange, m *MessagesRequest, out *MessagesReply)
}

// MessagesRequest is what the studio reads of a Messages request besides
// the Request it is recorded as: what the script needs to judge the order
// of tool_use and tool_result blocks as Anthropic does.
type MessagesRequest struct {
	Request *Request
	turns   []msgTurn
}

// msgTurn is one message's tool blocks, by id.
type msgTurn struct {
	role    string
	uses    []string // tool_use ids
	results []string // tool_result tool_use_ids
	resAt   []int    // each result's block index
}

// AnthropicError is an answer in Anthropic's error shape:
//
//	{"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: Field required"}}
//
// Anthropic's SDKs read the message from it and decide from the status
// whether to retry (408, 409, 429 and 5xx are retried), after Retry-After.
type AnthropicError struct {
	Status  int
	Type    string // "" takes the status's (anthropicType)
	Message string
	// RetryAfter, in seconds, is sent as Retry-After when not 0.
	RetryAfter int
}

func (e *AnthropicError) Error() string { return e.Message }

// Body is the error as JSON.
func (e *AnthropicError) Body() []byte {
	typ := e.Type
	if typ == "" {
		typ = anthropicType(e.Status)
	}
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": e.Message}})
	return b
}

// Write sends the error.
func (e *AnthropicError) Write(w http.ResponseWriter) {
	setRetryAfter(w.Header(), e.RetryAfter)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_, _ = w.Write(e.Body())
}

// anthropicType is the error type Anthropic gives a status.
func anthropicType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	case 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// AnthropicErrorBody is one of the studio's errors (a refused token, a body
// too large) in Anthropic's shape, for the routes Anthropic's clients call.
func AnthropicErrorBody(status int, msg string) []byte {
	return (&AnthropicError{Status: status, Message: msg}).Body()
}

// asAnthropic is one of the endpoint's own errors in Anthropic's shape.
func asAnthropic(e *Error) *AnthropicError {
	return &AnthropicError{Status: e.Status, Message: e.Message, RetryAfter: e.RetryAfter}
}

func msgInvalid(format string, args ...any) *AnthropicError {
	return &AnthropicError{Status: http.StatusBadRequest, Message: fmt.Sprintf(format, args...)}
}

// Anthropic's validation messages name the field by its path, dotted.
func msgMissing(at string) *AnthropicError { return msgInvalid("%s: Field required", at) }
func msgWrongType(at, want string) *AnthropicError {
	return msgInvalid("%s: Input should be a valid %s", at, want)
}

// ServeMessages is POST /v1/messages. The body is expected to be limited by
// the caller (a MaxBytesReader): past it, 413.
func (p *Proxy) ServeMessages(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			(&AnthropicError{Status: http.StatusRequestEntityTooLarge, Message: "The request is too large for this studio: at most " +
				byteSize(tooLarge.Limit) + "."}).Write(w)
			return
		}
		msgInvalid("The request body could not be read: %s", err.Error()).Write(w)
		return
	}
	m, perr := ParseMessages(body)
	if perr != nil {
		perr.Write(w)
		return
	}
	if p.cfg.Upstream == nil {
		asAnthropic(errNoUpstream).Write(w)
		return
	}
	up, ok := p.cfg.Upstream.(MessagesUpstream)
	if !ok {
		(&AnthropicError{Status: http.StatusNotFound, Message: "This studio's upstream, " + p.cfg.Upstream.String() +
			", is an OpenAI-compatible server: it answers POST /v1/chat/completions, not Anthropic's /v1/messages. " +
			"To record Messages calls, start the studio with --upstream-url URL --upstream-provider anthropic " +
			"(an Anthropic server) or --upstream script:SCENARIO.json (docs/proxy.md)."}).Write(w)
		return
	}
	key, kerr := sessionKey(r.Header.Get(SessionHeader))
	if kerr != nil {
		asAnthropic(kerr).Write(w)
		return
	}
	req := m.Request
	ls, turn, serr := p.start(r.Context(), key, req, r.Header.Get("User-Agent"), scenario.ProviderAnthropic)
	if serr != nil {
		asAnthropic(serr).Write(w)
		return
	}
	defer p.end(ls)
	taken(r.Context())
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	defer context.AfterFunc(p.stopping, func() { cancel(errStopped) })()
	out := &MessagesReply{r: newReply(w, turn, p.cfg.Now, req.Stream)}
	x := &Exchange{Request: req, Body: body, Header: r.Header, Agent: turn.Agent(), SessionID: ls.ID, Turn: turn, Timeout: p.cfg.Timeout}
	up.Messages(ctx, x, m, out)
	out.close(ctx)
}

// ParseMessages reads a Messages request and checks what Anthropic checks
// of its shape, answering what is wrong as Anthropic would (400, the field
// named by its path). The order of tool_use and tool_result blocks is the
// upstream's to judge (CheckSequence).
func ParseMessages(body []byte) (*MessagesRequest, *AnthropicError) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil || top == nil {
		return nil, msgInvalid("The request body is not valid JSON: send a JSON object with model, max_tokens and messages.")
	}
	req := &Request{}
	m := &MessagesRequest{Request: req}
	raw, ok := present(top, "model")
	switch {
	case !ok:
		return nil, msgMissing("model")
	case json.Unmarshal(raw, &req.Model) != nil:
		return nil, msgWrongType("model", "string")
	case req.Model == "":
		return nil, msgInvalid("model: String should have at least 1 character")
	}
	raw, ok = present(top, "max_tokens")
	if !ok {
		return nil, msgMissing("max_tokens")
	}
	var maxTokens int
	if json.Unmarshal(raw, &maxTokens) != nil {
		return nil, msgWrongType("max_tokens", "integer")
	}
	if raw, ok := present(top, "stream"); ok && json.Unmarshal(raw, &req.Stream) != nil {
		return nil, msgWrongType("stream", "boolean")
	}
	if raw, ok := present(top, "system"); ok {
		text, err := blocksText("system", raw, false)
		if err != nil {
			return nil, err
		}
		req.Messages = append(req.Messages, Message{Role: "system", Content: text})
	}
	raw, ok = present(top, "messages")
	if !ok {
		return nil, msgMissing("messages")
	}
	var msgs []json.RawMessage
	if json.Unmarshal(raw, &msgs) != nil {
		return nil, msgWrongType("messages", "list")
	}
	if len(msgs) == 0 {
		return nil, msgInvalid("messages: at least one message is required")
	}
	for i, raw := range msgs {
		if err := m.addMessage(fmt.Sprintf("messages.%d", i), raw); err != nil {
			return nil, err
		}
	}
	if err := m.parseTools(top); err != nil {
		return nil, err
	}
	if raw, ok := present(top, "tool_choice"); ok {
		var tc struct {
			Type *string `json:"type"`
			Name *string `json:"name"`
		}
		if json.Unmarshal(raw, &tc) != nil {
			return nil, msgWrongType("tool_choice", "dictionary or object")
		}
		switch {
		case tc.Type == nil:
			return nil, msgMissing("tool_choice.type")
		case *tc.Type == "auto" || *tc.Type == "any" || *tc.Type == "none":
		case *tc.Type == "tool":
			if tc.Name == nil {
				return nil, msgMissing("tool_choice.tool.name")
			}
		default:
			return nil, msgInvalid("tool_choice: Input tag '%s' found using 'type' does not match any of the expected tags: 'auto', 'any', 'tool', 'none'", *tc.Type)
		}
	}
	return m, nil
}

// addMessage reads one message: a user message's tool_result blocks become
// tool messages (in order, before its other content, where Anthropic wants
// them), its text and images one user message; an assistant message's text
// is its content and its tool_use blocks its tool calls.
func (m *MessagesRequest) addMessage(at string, raw json.RawMessage) *AnthropicError {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		return msgWrongType(at, "dictionary")
	}
	var role string
	if v, ok := present(obj, "role"); !ok {
		return msgMissing(at + ".role")
	} else if json.Unmarshal(v, &role) != nil || (role != "user" && role != "assistant") {
		return msgInvalid("%s.role: Input should be 'user' or 'assistant'", at)
	}
	content, ok := present(obj, "content")
	if !ok {
		return msgMissing(at + ".content")
	}
	turn := msgTurn{role: role}
	var s string
	if json.Unmarshal(content, &s) == nil {
		m.Request.Messages = append(m.Request.Messages, Message{Role: role, Content: s})
		m.turns = append(m.turns, turn)
		return nil
	}
	var blocks []json.RawMessage
	if json.Unmarshal(content, &blocks) != nil {
		return msgInvalid("%s.content: Input should be a valid string or a list of content blocks", at)
	}
	var text strings.Builder
	var calls []delegation.ToolCall
	var results []Message
	for i, b := range blocks {
		bat := fmt.Sprintf("%s.content.%d", at, i)
		var blk msgBlock
		if json.Unmarshal(b, &blk) != nil {
			return msgWrongType(bat, "dictionary")
		}
		if blk.Type == nil {
			return msgMissing(bat + ".type")
		}
		switch *blk.Type {
		case "text":
			if blk.Text == nil {
				return msgMissing(bat + ".text")
			}
			text.WriteString(*blk.Text)
		case "tool_use":
			if role != "assistant" {
				return msgInvalid("%s: tool_use blocks are only allowed in assistant messages", bat)
			}
			c, err := blk.toolUse(bat)
			if err != nil {
				return err
			}
			calls = append(calls, c)
			turn.uses = append(turn.uses, c.ID)
		case "tool_result":
			if role != "user" {
				return msgInvalid("%s: tool_result blocks are only allowed in user messages", bat)
			}
			r, err := blk.toolResult(bat)
			if err != nil {
				return err
			}
			results = append(results, r)
			turn.results = append(turn.results, r.ToolCallID)
			turn.resAt = append(turn.resAt, i)
		case "thinking", "redacted_thinking":
			// A reasoning model's thinking sent back: kept by the upstream,
			// never compared (ingest.Message.Reasoning).
		default:
			// An image, a document, a server tool's blocks: named, so that
			// it shows and two requests holding it compare equal.
			fmt.Fprintf(&text, "[%s]", strings.ReplaceAll(*blk.Type, "_", " "))
		}
	}
	m.Request.Messages = append(m.Request.Messages, results...)
	if role == "assistant" {
		m.Request.Messages = append(m.Request.Messages, Message{Role: role, Content: text.String(), ToolCalls: calls})
	} else if text.Len() > 0 || len(results) == 0 {
		m.Request.Messages = append(m.Request.Messages, Message{Role: role, Content: text.String()})
	}
	m.turns = append(m.turns, turn)
	return nil
}

// msgBlock is one content block of a message, as far as the studio reads it.
type msgBlock struct {
	Type      *string         `json:"type"`
	Text      *string         `json:"text"`
	ID        *string         `json:"id"`
	Name      *string         `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID *string         `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// toolUse reads a tool_use block (at bat) as the tool call it is.
func (blk *msgBlock) toolUse(bat string) (delegation.ToolCall, *AnthropicError) {
	switch {
	case blk.ID == nil:
		return delegation.ToolCall{}, msgMissing(bat + ".id")
	case blk.Name == nil:
		return delegation.ToolCall{}, msgMissing(bat + ".name")
	case len(blk.Input) == 0:
		return delegation.ToolCall{}, msgMissing(bat + ".input")
	}
	var input map[string]json.RawMessage
	if json.Unmarshal(blk.Input, &input) != nil || input == nil {
		return delegation.ToolCall{}, msgWrongType(bat+".input", "dictionary")
	}
	return delegation.ToolCall{ID: *blk.ID, Name: *blk.Name, Args: blk.Input}, nil
}

// toolResult reads a tool_result block (at bat) as the tool message it is.
func (blk *msgBlock) toolResult(bat string) (Message, *AnthropicError) {
	if blk.ToolUseID == nil {
		return Message{}, msgMissing(bat + ".tool_use_id")
	}
	res := ""
	if c, ok := present(map[string]json.RawMessage{"c": blk.Content}, "c"); ok {
		t, err := blocksText(bat+".content", c, true)
		if err != nil {
			return Message{}, err
		}
		res = t
	}
	return Message{Role: "tool", Content: res, ToolCallID: *blk.ToolUseID, IsError: blk.IsError}, nil
}

// blocksText reads a system prompt or a tool result: a string, or a list
// of blocks whose text is joined (an image in a tool result named).
func blocksText(at string, raw json.RawMessage, images bool) (string, *AnthropicError) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var blocks []json.RawMessage
	if json.Unmarshal(raw, &blocks) != nil {
		return "", msgInvalid("%s: Input should be a valid string or a list of text blocks", at)
	}
	var parts []string
	for i, b := range blocks {
		var blk struct {
			Type *string `json:"type"`
			Text *string `json:"text"`
		}
		bat := fmt.Sprintf("%s.%d", at, i)
		if json.Unmarshal(b, &blk) != nil {
			return "", msgWrongType(bat, "dictionary")
		}
		switch {
		case blk.Type == nil:
			return "", msgMissing(bat + ".type")
		case *blk.Type == "text" && blk.Text == nil:
			return "", msgMissing(bat + ".text")
		case *blk.Type == "text":
			parts = append(parts, *blk.Text)
		case images:
			parts = append(parts, "["+strings.ReplaceAll(*blk.Type, "_", " ")+"]")
		default:
			return "", msgInvalid("%s.type: Input should be 'text'", bat)
		}
	}
	// A system prompt in blocks is the blocks one after another, as the
	// model reads it; a tool result's blocks likewise.
	return strings.Join(parts, "\n\n"), nil
}

// parseTools reads tools: a custom tool's name, description and
// input_schema; a server tool (web search, code execution: a type of its
// own) is the upstream's, not a function the studio counts.
func (m *MessagesRequest) parseTools(top map[string]json.RawMessage) *AnthropicError {
	raw, ok := present(top, "tools")
	if !ok {
		return nil
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return msgWrongType("tools", "list")
	}
	for i, item := range list {
		at := fmt.Sprintf("tools.%d", i)
		var t struct {
			Type        *string         `json:"type"`
			Name        *string         `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		}
		if json.Unmarshal(item, &t) != nil {
			return msgWrongType(at, "dictionary")
		}
		if t.Type != nil && *t.Type != "custom" {
			continue
		}
		switch {
		case t.Name == nil:
			return msgMissing(at + ".name")
		case !validToolName(*t.Name, 128):
			return msgInvalid("%s.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'", at)
		case len(t.InputSchema) == 0 || string(t.InputSchema) == "null":
			return msgMissing(at + ".input_schema")
		}
		var schema map[string]json.RawMessage
		if json.Unmarshal(t.InputSchema, &schema) != nil {
			return msgWrongType(at+".input_schema", "dictionary")
		}
		m.Request.Tools = append(m.Request.Tools, delegation.ToolDef{Name: *t.Name, Description: t.Description, Parameters: t.InputSchema})
	}
	return nil
}

// CheckSequence checks what Anthropic checks of the blocks' order: every
// tool_result answers a tool_use of the message before it, and every
// tool_use is answered in the message after it. The scripted upstream
// answers as Anthropic would; a real upstream judges for itself.
func (m *MessagesRequest) CheckSequence() *AnthropicError {
	for i, t := range m.turns {
		var prev []string
		if i > 0 {
			prev = m.turns[i-1].uses
		}
		for j, id := range t.results {
			if indexOf(prev, id) < 0 {
				return msgInvalid("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. "+
					"Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, t.resAt[j], id)
			}
		}
		if len(t.uses) == 0 || i == len(m.turns)-1 {
			continue
		}
		var missing []string
		for _, id := range t.uses {
			if indexOf(m.turns[i+1].results, id) < 0 {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			return msgInvalid("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. "+
				"Each `tool_use` block must have a corresponding `tool_result` block in the next message.", i, strings.Join(missing, ", "))
		}
	}
	return nil
}
