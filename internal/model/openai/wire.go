package openai

// max_tokens, which OpenAI deprecated, is what most OpenAI-compatible
// servers take; only those that refuse it get max_completion_tokens.
//lint:file-ignore SA1019 max_tokens is sent on purpose, see above

import (
	"bytes"
	"encoding/json"
	"strings"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/model/remote"
)

// SummaryInstruction is the user message appended to a PurposeSummary call
// (every remote adapter's, remote.SummaryInstruction).
const SummaryInstruction = remote.SummaryInstruction

// rejectedStructured prefixes the engine's validation error when, in native
// JSON mode, it goes back to the model as a user message (see buildRequest).
const rejectedStructured = "Your JSON answer was not accepted. "

// call is one Generate's request in wire form, with what is needed to read
// the answer back.
type call struct {
	req   goopenai.ChatCompletionRequest
	model string
	// structured is the structured-answer tool's name when the endpoint's
	// native JSON mode stands in for it; "" otherwise.
	structured string
	// retrying, when set, is told of each retried attempt.
	retrying func(delegation.ModelRetry)
	// What the last attempt sent of the parts an endpoint may refuse
	// (rejectedOption).
	sentStreamOptions, sentMaxTokens, defaultParallel bool
}

// result is an answer as read from the wire, before it is mapped to the
// engine's Response: the same for a streamed and a whole answer.
type result struct {
	content      string
	reasoning    string
	calls        []rawCall
	usage        *delegation.Usage
	finishReason string
	id, model    string // the completion's, as the server sent them
}

type rawCall struct {
	id, name, args string
}

// buildRequest maps the engine's request to a chat-completions request.
func (m *Model) buildRequest(req *delegation.Request) *call {
	c := &call{model: m.model}
	if req.Model != "" {
		c.model = req.Model
	}
	summary := req.Purpose == delegation.PurposeSummary
	if m.native && !summary && len(req.ResponseFormat) > 0 {
		c.structured = schemaTitle(req.ResponseFormat)
	}

	msgs := make([]goopenai.ChatCompletionMessage, 0, len(req.Messages)+2)
	if req.System != "" {
		msgs = append(msgs, goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleSystem, Content: req.System})
	}
	msgs = c.appendMessages(msgs, req.Messages)
	if summary {
		msgs = append(msgs, goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleUser, Content: SummaryInstruction})
	}

	c.req = goopenai.ChatCompletionRequest{Model: c.model, Messages: msgs}
	if !summary {
		for _, t := range req.Tools {
			if c.structured != "" && t.Name == c.structured {
				continue
			}
			params := json.RawMessage(t.Parameters)
			if len(bytes.TrimSpace(params)) == 0 {
				params = json.RawMessage(`{"type":"object","properties":{}}`)
			}
			c.req.Tools = append(c.req.Tools, goopenai.Tool{Type: goopenai.ToolTypeFunction,
				Function: &goopenai.FunctionDefinition{Name: t.Name, Description: t.Description, Parameters: params}})
		}
	}
	st := m.settings
	if len(c.req.Tools) > 0 {
		c.req.ParallelToolCalls, c.req.ToolChoice = toolSettings(st, c.req.Tools)
	}
	c.req.MaxTokens = st.MaxTokens
	if st.Seed != nil {
		seed := *st.Seed
		c.req.Seed = &seed
	}
	if req.ToolChoice == delegation.ToolChoiceRequired && c.structured == "" && len(c.req.Tools) > 0 {
		// An agent with a response_format answers only through its tool, as
		// deepagents binds it with tool_choice "any"; in native JSON mode the
		// answer is the text itself, so nothing is forced.
		c.req.ToolChoice = "required"
	}
	if c.structured != "" {
		c.req.ResponseFormat = &goopenai.ChatCompletionResponseFormat{
			Type: goopenai.ChatCompletionResponseFormatTypeJSONSchema,
			JSONSchema: &goopenai.ChatCompletionResponseFormatJSONSchema{
				Name: c.structured, Schema: json.RawMessage(req.ResponseFormat),
				// Strict mode demands every property be required and no
				// additional ones allowed; the engine validates instead.
				Strict: false,
			},
		}
	}
	return c
}

// appendMessages maps the conversation. In native JSON mode the model
// never calls the structured tool: the engine sees such a call only because
// finish made one from the model's JSON text. Sending it back as a call of
// a tool the request does not offer would puzzle the model (and some
// servers), so it goes back as what the model wrote, and the engine's
// verdict as a user message.
func (c *call) appendMessages(msgs []goopenai.ChatCompletionMessage, conv []*delegation.Message) []goopenai.ChatCompletionMessage {
	answered := map[string]bool{}
	for _, msg := range conv {
		if msg == nil {
			continue
		}
		switch msg.Role {
		case delegation.RoleAssistant:
			if c.structured != "" && len(msg.ToolCalls) == 1 && msg.ToolCalls[0].Name == c.structured {
				answered[msg.ToolCalls[0].ID] = true
				msgs = append(msgs, goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleAssistant,
					Content: nonEmpty(string(msg.ToolCalls[0].Args))})
				continue
			}
			out := goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleAssistant, Content: msg.Content}
			for _, tc := range msg.ToolCalls {
				args := string(tc.Args)
				if strings.TrimSpace(args) == "" {
					args = "{}"
				}
				out.ToolCalls = append(out.ToolCalls, goopenai.ToolCall{ID: tc.ID, Type: goopenai.ToolTypeFunction,
					Function: goopenai.FunctionCall{Name: tc.Name, Arguments: args}})
			}
			if len(out.ToolCalls) == 0 {
				out.Content = nonEmpty(out.Content)
			}
			msgs = append(msgs, out)
		case delegation.RoleTool:
			if answered[msg.ToolCallID] {
				msgs = append(msgs, goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleUser,
					Content: rejectedStructured + msg.Content})
				continue
			}
			msgs = append(msgs, goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleTool,
				Content: nonEmpty(msg.Content), ToolCallID: msg.ToolCallID})
		default:
			// User messages, whatever their kind: a summary, a task
			// description and a fork preamble are all text for the model.
			msgs = append(msgs, goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleUser,
				Content: nonEmpty(msg.Content)})
		}
	}
	return msgs
}

// toolSettings are parallel_tool_calls and tool_choice, sent only with
// tools: OpenAI rejects them without.
func toolSettings(st Settings, tools []goopenai.Tool) (parallel bool, choice any) {
	parallel = true
	if st.ParallelToolCalls != nil {
		parallel = *st.ParallelToolCalls
	}
	switch st.ToolChoice {
	case "":
	case ToolChoiceAuto, ToolChoiceNone, ToolChoiceRequired:
		choice = st.ToolChoice
	default:
		for _, t := range tools {
			if t.Function.Name == st.ToolChoice {
				choice = goopenai.ToolChoice{Type: goopenai.ToolTypeFunction, Function: goopenai.ToolFunction{Name: st.ToolChoice}}
			}
		}
	}
	return parallel, choice
}

// wireRequest is the request one attempt sends: streamed or not, without
// what the endpoint was found to refuse.
func (m *Model) wireRequest(c *call, stream bool) goopenai.ChatCompletionRequest {
	req := c.req
	req.Stream = stream
	c.sentStreamOptions = stream && !m.compat.noStreamOptions.Load()
	if c.sentStreamOptions {
		// Without it the endpoint sends no usage at all when streaming.
		req.StreamOptions = &goopenai.StreamOptions{IncludeUsage: true}
	}
	c.sentMaxTokens = req.MaxTokens > 0 && !m.compat.maxCompletionTokens.Load()
	if req.MaxTokens > 0 && !c.sentMaxTokens {
		req.MaxCompletionTokens, req.MaxTokens = req.MaxTokens, 0
	}
	c.defaultParallel = req.ParallelToolCalls != nil && m.settings.ParallelToolCalls == nil
	if c.defaultParallel && m.compat.noParallel.Load() {
		req.ParallelToolCalls, c.defaultParallel = nil, false
	}
	return req
}

func nonEmpty(s string) string { return remote.NonEmpty(s) }

// schemaTitle is a response_format's title: the name of its tool.
func schemaTitle(schema json.RawMessage) string {
	var s struct {
		Title string `json:"title"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return ""
	}
	return s.Title
}

// finish maps an answer read from the wire to the engine's Response.
func (c *call) finish(r *result) *delegation.Response {
	out := &delegation.Response{Content: r.content, Reasoning: r.reasoning, Usage: r.usage,
		Meta: delegation.MetaOf(r.id, r.model, r.finishReason)}
	for _, rc := range r.calls {
		out.ToolCalls = append(out.ToolCalls, delegation.ToolCall{ID: rc.id, Name: rc.name, Args: cleanArgs(rc.args)})
	}
	if c.structured != "" && len(out.ToolCalls) == 0 {
		// The engine's structured path (validation, the receipt) starts from
		// a call of the structured tool, so the JSON answer becomes one. The
		// text is dropped: it would repeat the arguments in the message.
		if args, ok := jsonObject(r.content); ok {
			out.ToolCalls = []delegation.ToolCall{{Name: c.structured, Args: args}}
			out.Content = ""
		}
	}
	return out
}

// cleanArgs makes a tool call's arguments safe for the engine
// (remote.CleanArgs).
func cleanArgs(s string) json.RawMessage { return remote.CleanArgs(s) }

// jsonObject reports whether text is a JSON object, allowing the Markdown
// fence some models wrap it in, and returns it compacted.
func jsonObject(text string) (json.RawMessage, bool) {
	t := strings.TrimSpace(text)
	if strings.HasPrefix(t, "```") && strings.HasSuffix(t, "```") && len(t) >= 6 {
		t = strings.TrimSpace(t[3 : len(t)-3])
		t = strings.TrimSpace(strings.TrimPrefix(t, "json"))
	}
	if !strings.HasPrefix(t, "{") || !json.Valid([]byte(t)) {
		return nil, false
	}
	var buf bytes.Buffer
	if json.Compact(&buf, []byte(t)) != nil {
		return nil, false
	}
	return buf.Bytes(), true
}

// fromCompletion reads a whole (not streamed) answer.
func fromCompletion(resp goopenai.ChatCompletionResponse) (*result, bool) {
	if len(resp.Choices) == 0 {
		return nil, false
	}
	ch := resp.Choices[0]
	msg := ch.Message
	r := &result{content: msg.Content, reasoning: msg.ReasoningContent, finishReason: string(ch.FinishReason),
		id: resp.ID, model: resp.Model}
	if r.content == "" {
		var parts []string
		for _, p := range msg.MultiContent {
			if p.Type == goopenai.ChatMessagePartTypeText {
				parts = append(parts, p.Text)
			}
		}
		r.content = strings.Join(parts, "")
	}
	if r.content == "" {
		// A refusal is the model's answer: the receipt should carry it.
		r.content = msg.Refusal
	}
	for _, tc := range msg.ToolCalls {
		r.calls = append(r.calls, rawCall{id: tc.ID, name: tc.Function.Name, args: tc.Function.Arguments})
	}
	if len(r.calls) == 0 && msg.FunctionCall != nil && msg.FunctionCall.Name != "" {
		// The legacy single function_call, still sent by some servers.
		r.calls = append(r.calls, rawCall{name: msg.FunctionCall.Name, args: msg.FunctionCall.Arguments})
	}
	r.usage = usageOf(&resp.Usage)
	return r, true
}

// usageOf is nil when the endpoint reported nothing, so the engine does not
// record a count of zero as if it were one. Cached prompt tokens (a prompt
// cache hit: what a fork's shared prefix buys) and reasoning tokens (spent
// thinking, not in the answer) are kept when the endpoint reports them.
func usageOf(u *goopenai.Usage) *delegation.Usage {
	if u == nil || (u.PromptTokens == 0 && u.CompletionTokens == 0) {
		return nil
	}
	out := &delegation.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens}
	if d := u.PromptTokensDetails; d != nil {
		out.CachedTokens, out.CachedReported = d.CachedTokens, true
	}
	if d := u.CompletionTokensDetails; d != nil {
		out.ReasoningTokens = d.ReasoningTokens
	}
	return out
}
