package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/ingest"
)

// Request is what the studio reads of a chat-completions request: enough to
// record what the agent sent and to answer it. The request itself is
// forwarded as the client sent it, every field kept.
type Request struct {
	Model        string
	Stream       bool
	IncludeUsage bool // stream_options.include_usage
	Messages     []Message
	Tools        []delegation.ToolDef
	// ResponseFormat is response_format as sent ("" when absent): a
	// scripted upstream plays its turn's content whatever it asks.
	ResponseFormat json.RawMessage
}

// Message is one message of a request, as sent.
type Message struct {
	Role       string // system, developer, user, assistant, tool or function
	Content    string // its text; parts are joined, and what is not text is named
	ToolCalls  []delegation.ToolCall
	ToolCallID string
	Name       string
	IsError    bool // an Anthropic tool_result's is_error
}

var roles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true, "function": true}

// validToolName is the providers' rule for a tool's name: 1 to max
// letters, digits, _ and - (OpenAI's max is 64, Anthropic's 128). A loop,
// not a regexp: a bounded repetition compiles into a program of its size
// at every start.
func validToolName(name string, max int) bool {
	if name == "" || len(name) > max {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

const badJSON = "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library " +
	"correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)"

// Parse reads a chat-completions request and checks what OpenAI checks of
// its shape, answering what is wrong as OpenAI would (400, with the
// parameter named). The order of the messages — a tool result with no
// call before it, a call left unanswered — is the upstream's to judge
// (CheckSequence), since servers differ in what they accept.
func Parse(body []byte) (*Request, *Error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil || top == nil {
		if json.Valid(body) {
			return nil, invalid("", "", "Invalid request body: expected a JSON object, but got %s instead.", kindOf(body))
		}
		return nil, invalid("", "", "%s", badJSON)
	}
	r := &Request{}
	if raw, ok := present(top, "model"); !ok {
		return nil, invalid("", "", "you must provide a model parameter")
	} else if json.Unmarshal(raw, &r.Model) != nil {
		return nil, wrongType("model", "a string", raw)
	} else if r.Model == "" {
		return nil, invalid("", "", "you must provide a model parameter")
	}
	if raw, ok := present(top, "stream"); ok && json.Unmarshal(raw, &r.Stream) != nil {
		return nil, wrongType("stream", "a boolean", raw)
	}
	if raw, ok := present(top, "stream_options"); ok {
		var so map[string]json.RawMessage
		if json.Unmarshal(raw, &so) != nil {
			return nil, wrongType("stream_options", "an object", raw)
		}
		if v, ok := present(so, "include_usage"); ok && json.Unmarshal(v, &r.IncludeUsage) != nil {
			return nil, wrongType("stream_options.include_usage", "a boolean", v)
		}
	}
	if raw, ok := present(top, "n"); ok {
		var n int
		if json.Unmarshal(raw, &n) != nil {
			return nil, wrongType("n", "an integer", raw)
		}
	}
	raw, ok := present(top, "messages")
	if !ok {
		return nil, missing("messages")
	}
	var msgs []json.RawMessage
	if json.Unmarshal(raw, &msgs) != nil {
		return nil, wrongType("messages", "an array of objects", raw)
	}
	if len(msgs) == 0 {
		return nil, invalid("messages", "empty_array", "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.")
	}
	for i, m := range msgs {
		msg, err := parseMessage(fmt.Sprintf("messages[%d]", i), m)
		if err != nil {
			return nil, err
		}
		r.Messages = append(r.Messages, msg)
	}
	if err := r.parseTools(top); err != nil {
		return nil, err
	}
	if raw, ok := present(top, "response_format"); ok {
		var rf struct {
			Type       *string         `json:"type"`
			JSONSchema json.RawMessage `json:"json_schema"`
		}
		if json.Unmarshal(raw, &rf) != nil {
			return nil, wrongType("response_format", "an object", raw)
		}
		switch {
		case rf.Type == nil:
			return nil, missing("response_format.type")
		case *rf.Type == "text" || *rf.Type == "json_object":
		case *rf.Type == "json_schema":
			var js struct {
				Name *string `json:"name"`
			}
			if json.Unmarshal(rf.JSONSchema, &js) != nil || js.Name == nil {
				return nil, missing("response_format.json_schema.name")
			}
		default:
			return nil, invalid("response_format.type", "invalid_value",
				"Invalid value: '%s'. Supported values are: 'text', 'json_object', and 'json_schema'.", *rf.Type)
		}
		r.ResponseFormat = raw
	}
	return r, nil
}

// present returns a member that is there and not null.
func present(obj map[string]json.RawMessage, key string) (json.RawMessage, bool) {
	raw, ok := obj[key]
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		return nil, false
	}
	return raw, true
}

func parseMessage(at string, raw json.RawMessage) (Message, *Error) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		return Message{}, wrongType(at, "an object", raw)
	}
	var m Message
	role, ok := present(obj, "role")
	if !ok {
		return m, missing(at + ".role")
	}
	if json.Unmarshal(role, &m.Role) != nil {
		return m, wrongType(at+".role", "a string", role)
	}
	if !roles[m.Role] {
		return m, invalid(at+".role", "invalid_value",
			"Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.", m.Role)
	}
	if v, ok := present(obj, "name"); ok && json.Unmarshal(v, &m.Name) != nil {
		return m, wrongType(at+".name", "a string", v)
	}
	content, hasContent := present(obj, "content")
	switch {
	case hasContent:
		text, err := contentText(at+".content", content)
		if err != nil {
			return m, err
		}
		m.Content = text
	case m.Role != "assistant":
		return m, missing(at + ".content")
	}
	switch m.Role {
	case "assistant":
		if v, ok := present(obj, "tool_calls"); ok {
			calls, err := parseToolCalls(at+".tool_calls", v)
			if err != nil {
				return m, err
			}
			m.ToolCalls = calls
		}
		if v, ok := present(obj, "function_call"); ok && len(m.ToolCalls) == 0 {
			var fc struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			}
			if json.Unmarshal(v, &fc) != nil {
				return m, wrongType(at+".function_call", "an object", v)
			}
			m.ToolCalls = []delegation.ToolCall{{Name: fc.Name, Args: json.RawMessage(fc.Arguments)}}
		}
	case "tool":
		v, ok := present(obj, "tool_call_id")
		if !ok {
			return m, invalid(at+".tool_call_id", "missing_required_parameter",
				"Missing parameter 'tool_call_id': messages with role 'tool' must have a 'tool_call_id'.")
		}
		if json.Unmarshal(v, &m.ToolCallID) != nil {
			return m, wrongType(at+".tool_call_id", "a string", v)
		}
	case "function":
		if m.Name == "" {
			return m, missing(at + ".name")
		}
	}
	return m, nil
}

// contentText reads content: a string, or an array of parts whose text
// parts are joined; a part that is not text (an image, audio, a file) is
// named in brackets, so that it shows and two requests holding it compare
// equal.
func contentText(at string, raw json.RawMessage) (string, *Error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, capString(at, s)
	}
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) != nil {
		return "", wrongType(at, "one of a string or array of objects", raw)
	}
	var b strings.Builder
	for i, p := range parts {
		pat := fmt.Sprintf("%s[%d]", at, i)
		var part struct {
			Type    *string         `json:"type"`
			Text    *string         `json:"text"`
			Refusal *string         `json:"refusal"`
			Image   json.RawMessage `json:"image_url"`
		}
		if json.Unmarshal(p, &part) != nil {
			return "", wrongType(pat, "an object", p)
		}
		if part.Type == nil {
			return "", missing(pat + ".type")
		}
		switch *part.Type {
		case "text":
			if part.Text == nil {
				return "", missing(pat + ".text")
			}
			if err := capString(pat+".text", *part.Text); err != nil {
				return "", err
			}
			b.WriteString(*part.Text)
		case "refusal":
			if part.Refusal != nil {
				if err := capString(pat+".refusal", *part.Refusal); err != nil {
					return "", err
				}
				b.WriteString(*part.Refusal)
			}
		case "image_url", "input_audio", "file", "audio":
			fmt.Fprintf(&b, "[%s]", strings.ReplaceAll(*part.Type, "_", " "))
		default:
			return "", invalid(pat+".type", "invalid_value",
				"Invalid value: '%s'. Supported values are: 'text', 'image_url', 'input_audio', 'refusal', 'audio', and 'file'.", *part.Type)
		}
	}
	return b.String(), nil
}

// MaxString is the most characters OpenAI takes in one string of a
// request: a message's content, or one of its parts' text. A longer one is
// refused before anything else is done with it (counting its tokens, above
// all), as OpenAI refuses it.
const MaxString = 10 << 20 // 10,485,760

// capString refuses a string longer than MaxString characters, in
// OpenAI's words.
func capString(at, s string) *Error {
	if len(s) <= MaxString { // a character is at least a byte
		return nil
	}
	if n := utf8.RuneCountInString(s); n > MaxString {
		return invalid(at, "string_above_max_length",
			"Invalid '%s': string too long. Expected a string with maximum length %d, but got a string with length %d instead.", at, MaxString, n)
	}
	return nil
}

func parseToolCalls(at string, raw json.RawMessage) ([]delegation.ToolCall, *Error) {
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return nil, wrongType(at, "an array of objects", raw)
	}
	var out []delegation.ToolCall
	for i, item := range list {
		pat := fmt.Sprintf("%s[%d]", at, i)
		var tc struct {
			ID       *string `json:"id"`
			Function *struct {
				Name      *string         `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"function"`
		}
		if json.Unmarshal(item, &tc) != nil {
			return nil, wrongType(pat, "an object", item)
		}
		switch {
		case tc.ID == nil:
			return nil, missing(pat + ".id")
		case tc.Function == nil:
			return nil, missing(pat + ".function")
		case tc.Function.Name == nil:
			return nil, missing(pat + ".function.name")
		}
		var args string
		if a, ok := present(map[string]json.RawMessage{"a": tc.Function.Arguments}, "a"); !ok {
			return nil, missing(pat + ".function.arguments")
		} else if json.Unmarshal(a, &args) != nil {
			return nil, wrongType(pat+".function.arguments", "a string", a)
		}
		out = append(out, delegation.ToolCall{ID: *tc.ID, Name: *tc.Function.Name, Args: json.RawMessage(args)})
	}
	return out, nil
}

func (r *Request) parseTools(top map[string]json.RawMessage) *Error {
	type function struct {
		Name        *string         `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	add := func(at string, f *function) *Error {
		if f.Name == nil {
			return missing(at + ".name")
		}
		if !validToolName(*f.Name, 64) {
			return invalid(at+".name", "invalid_value", "Invalid '%s.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.", at)
		}
		params := f.Parameters
		if len(params) == 0 || string(params) == "null" {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		r.Tools = append(r.Tools, delegation.ToolDef{Name: *f.Name, Description: f.Description, Parameters: params})
		return nil
	}
	if raw, ok := present(top, "tools"); ok {
		var list []json.RawMessage
		if json.Unmarshal(raw, &list) != nil {
			return wrongType("tools", "an array of objects", raw)
		}
		for i, item := range list {
			at := fmt.Sprintf("tools[%d]", i)
			var t struct {
				Type     *string   `json:"type"`
				Function *function `json:"function"`
			}
			if json.Unmarshal(item, &t) != nil {
				return wrongType(at, "an object", item)
			}
			if t.Type == nil {
				return missing(at + ".type")
			}
			if *t.Type != "function" {
				// Other kinds (custom tools) are the upstream's to judge;
				// they are not function definitions the studio counts.
				continue
			}
			if t.Function == nil {
				return missing(at + ".function")
			}
			if err := add(at+".function", t.Function); err != nil {
				return err
			}
		}
	}
	if raw, ok := present(top, "functions"); ok {
		var list []json.RawMessage
		if json.Unmarshal(raw, &list) != nil {
			return wrongType("functions", "an array of objects", raw)
		}
		for i, item := range list {
			var f function
			if json.Unmarshal(item, &f) != nil {
				return wrongType(fmt.Sprintf("functions[%d]", i), "an object", item)
			}
			if err := add(fmt.Sprintf("functions[%d]", i), &f); err != nil {
				return err
			}
		}
	}
	return nil
}

// CheckSequence checks what OpenAI checks of the messages' order: every
// tool result answers a call of the assistant message before it, and every
// call is answered before the conversation goes on. The scripted upstream
// answers as OpenAI would; a real upstream judges for itself.
func (r *Request) CheckSequence() *Error {
	var open []string // calls of the last assistant message not answered yet
	openAt := -1
	for i, m := range r.Messages {
		switch m.Role {
		case "tool":
			j := indexOf(open, m.ToolCallID)
			if openAt < 0 || j < 0 {
				return invalid(fmt.Sprintf("messages.[%d].role", i), "",
					"Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.")
			}
			open = append(open[:j], open[j+1:]...)
			continue
		}
		if len(open) > 0 {
			return unanswered(openAt, open)
		}
		openAt, open = -1, nil
		if m.Role == "assistant" && len(m.ToolCalls) > 0 {
			openAt = i
			for _, c := range m.ToolCalls {
				open = append(open, c.ID)
			}
		}
	}
	if len(open) > 0 {
		return unanswered(openAt, open)
	}
	return nil
}

func unanswered(at int, ids []string) *Error {
	return invalid(fmt.Sprintf("messages.[%d].role", at), "",
		"An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. "+
			"The following tool_call_ids did not have response messages: %s", strings.Join(ids, ", "))
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// Call is the request as the delegation inference reads it: the leading
// system and developer messages are the system prompt; the rest, in order.
// A system message further down is kept as a user message, where the model
// reads it.
func (r *Request) Call(at time.Time) ingest.CallInput {
	in := ingest.CallInput{Model: r.Model, Tools: r.Tools, At: at}
	var system []string
	i := 0
	for ; i < len(r.Messages); i++ {
		m := r.Messages[i]
		if m.Role != "system" && m.Role != "developer" {
			break
		}
		system = append(system, m.Content)
	}
	in.System = strings.Join(system, "\n\n")
	for _, m := range r.Messages[i:] {
		msg := ingest.Message{Content: m.Content, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID, IsError: m.IsError}
		switch m.Role {
		case "assistant":
			msg.Role = delegation.RoleAssistant
		case "tool", "function":
			msg.Role = delegation.RoleTool
			if m.Role == "function" {
				msg.ToolCallID = ""
			}
		default:
			msg.Role = delegation.RoleUser
		}
		in.Input = append(in.Input, msg)
	}
	return in
}

// Starts reports whether the request opens a conversation: nothing but
// system and user messages, no answer of a model in it yet.
func (r *Request) Starts() bool {
	for _, m := range r.Messages {
		if m.Role == "assistant" || m.Role == "tool" || m.Role == "function" {
			return false
		}
	}
	return true
}

// Prompt is the first user message, "" when there is none.
func (r *Request) Prompt() string {
	for _, m := range r.Messages {
		if m.Role == "user" {
			return m.Content
		}
	}
	return ""
}
