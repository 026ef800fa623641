package anthropic

import (
	"bytes"
	"encoding/json"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/model/remote"
)

// call is one Generate's request in wire form.
type call struct {
	params sdk.MessageNewParams
	model  string
	// maxTokens is the max_tokens sent, for the error of an answer cut off
	// at it.
	maxTokens int
	retrying  func(delegation.ModelRetry)
}

// buildRequest maps the engine's request to a Messages request: the system
// prompt at the top level, the engine's messages as alternating user and
// assistant turns (tool results, and what follows them, in the user turn
// after the assistant's tool_use blocks), the tools with their input
// schemas.
func (m *Model) buildRequest(req *delegation.Request) *call {
	c := &call{model: m.model, maxTokens: m.settings.MaxTokens}
	if req.Model != "" {
		c.model = req.Model
	}
	if c.maxTokens <= 0 {
		c.maxTokens = DefaultMaxTokens
	}
	summary := req.Purpose == delegation.PurposeSummary
	p := sdk.MessageNewParams{Model: sdk.Model(c.model), MaxTokens: int64(c.maxTokens), Messages: messages(req.Messages)}
	if summary {
		p.Messages = appendTurn(p.Messages, false, sdk.NewTextBlock(remote.SummaryInstruction))
	}
	if req.System != "" {
		p.System = []sdk.TextBlockParam{{Text: req.System}}
	}
	// The prompt cache: a marker on the request's last cacheable block, so
	// a later call that shares this one's prefix (the agent's next turn, a
	// fork's child) reads it from the cache.
	p.CacheControl = sdk.NewCacheControlEphemeralParam()
	if !summary {
		for _, t := range req.Tools {
			p.Tools = append(p.Tools, sdk.ToolUnionParam{OfTool: &sdk.ToolParam{Name: t.Name,
				Description: sdk.String(t.Description), InputSchema: inputSchema(t.Parameters)}})
		}
	}
	if len(p.Tools) > 0 {
		p.ToolChoice = m.toolChoice(req, p.Tools)
	}
	c.params = p
	return c
}

// messages maps the engine's messages to Messages turns. Consecutive
// messages of one side go into one turn, as the API wants them to
// alternate; a tool result is a tool_result block, with is_error.
func messages(in []*delegation.Message) []sdk.MessageParam {
	var out []sdk.MessageParam
	for _, msg := range in {
		if msg == nil {
			continue
		}
		switch msg.Role {
		case delegation.RoleAssistant:
			var blocks []sdk.ContentBlockParamUnion
			if msg.Content != "" || len(msg.ToolCalls) == 0 {
				blocks = append(blocks, sdk.NewTextBlock(remote.NonEmpty(msg.Content)))
			}
			for _, tc := range msg.ToolCalls {
				blocks = append(blocks, sdk.NewToolUseBlock(tc.ID, toolInput(tc.Args), tc.Name))
			}
			out = appendTurn(out, true, blocks...)
		case delegation.RoleTool:
			out = appendTurn(out, false, sdk.NewToolResultBlock(msg.ToolCallID, remote.NonEmpty(msg.Content), msg.IsError))
		default:
			// User messages, whatever their kind: a summary, a task and a
			// fork preamble are all text for the model.
			out = appendTurn(out, false, sdk.NewTextBlock(remote.NonEmpty(msg.Content)))
		}
	}
	return out
}

// appendTurn adds blocks to the last turn when it is the same side's, or as
// a new turn.
func appendTurn(turns []sdk.MessageParam, assistant bool, blocks ...sdk.ContentBlockParamUnion) []sdk.MessageParam {
	if n := len(turns); n > 0 {
		last := &turns[n-1]
		if assistant && last.OfAssistant != nil {
			last.OfAssistant.Content = append(last.OfAssistant.Content, blocks...)
			return turns
		}
		if !assistant && last.OfUser != nil {
			last.OfUser.Content = append(last.OfUser.Content, blocks...)
			return turns
		}
	}
	if assistant {
		return append(turns, sdk.NewAssistantMessage(blocks...))
	}
	return append(turns, sdk.NewUserMessage(blocks...))
}

// toolInput is a tool call's arguments as a tool_use block's input, which
// must be a JSON object: arguments that are not one (the engine keeps
// malformed ones as a JSON string, and has told the model so in the tool's
// result) are sent as {}.
func toolInput(args json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(args)
	if len(t) > 0 && t[0] == '{' && json.Valid(t) {
		return t
	}
	return json.RawMessage("{}")
}

// inputSchema is a tool's JSON Schema as the API's input_schema: its
// properties and required list, and anything else it says, kept as it is.
func inputSchema(params json.RawMessage) sdk.ToolInputSchemaParam {
	var doc map[string]json.RawMessage
	if len(bytes.TrimSpace(params)) == 0 || json.Unmarshal(params, &doc) != nil {
		return sdk.ToolInputSchemaParam{Properties: map[string]any{}}
	}
	s := sdk.ToolInputSchemaParam{Properties: map[string]any{}}
	if props, ok := doc["properties"]; ok {
		s.Properties = props
	}
	if req, ok := doc["required"]; ok {
		_ = json.Unmarshal(req, &s.Required)
	}
	for k, v := range doc {
		switch k {
		case "type", "properties", "required":
		default:
			if s.ExtraFields == nil {
				s.ExtraFields = map[string]any{}
			}
			s.ExtraFields[k] = v
		}
	}
	return s
}

// toolChoice is the request's tool_choice: the engine's requirement of a
// tool call ("any"), else the agent's setting; parallel_tool_calls false
// becomes disable_parallel_tool_use.
func (m *Model) toolChoice(req *delegation.Request, tools []sdk.ToolUnionParam) sdk.ToolChoiceUnionParam {
	st := m.settings
	noParallel := st.ParallelToolCalls != nil && !*st.ParallelToolCalls
	choice := st.ToolChoice
	if req.ToolChoice == delegation.ToolChoiceRequired {
		choice = ToolChoiceRequired
	}
	switch choice {
	case ToolChoiceNone:
		return sdk.ToolChoiceUnionParam{OfNone: &sdk.ToolChoiceNoneParam{}}
	case ToolChoiceRequired:
		a := &sdk.ToolChoiceAnyParam{}
		if noParallel {
			a.DisableParallelToolUse = sdk.Bool(true)
		}
		return sdk.ToolChoiceUnionParam{OfAny: a}
	case "", ToolChoiceAuto:
	default:
		for _, t := range tools {
			if t.OfTool != nil && t.OfTool.Name == choice {
				tc := &sdk.ToolChoiceToolParam{Name: choice}
				if noParallel {
					tc.DisableParallelToolUse = sdk.Bool(true)
				}
				return sdk.ToolChoiceUnionParam{OfTool: tc}
			}
		}
	}
	if !noParallel && choice == "" {
		return sdk.ToolChoiceUnionParam{} // the API's default: auto
	}
	a := &sdk.ToolChoiceAutoParam{}
	if noParallel {
		a.DisableParallelToolUse = sdk.Bool(true)
	}
	return sdk.ToolChoiceUnionParam{OfAuto: a}
}

// response maps an answer to the engine's Response: the text blocks' text,
// thinking as reasoning, tool_use blocks as tool calls, the usage, and the
// message's id, model and stop_reason as sent.
func response(msg *sdk.Message) *delegation.Response {
	out := &delegation.Response{Meta: delegation.MetaOf(msg.ID, string(msg.Model), string(msg.StopReason))}
	var text, thinking strings.Builder
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "thinking":
			thinking.WriteString(b.Thinking)
		case "tool_use":
			out.ToolCalls = append(out.ToolCalls, delegation.ToolCall{ID: b.ID, Name: b.Name, Args: remote.CleanArgs(string(b.Input))})
		}
	}
	out.Content, out.Reasoning = text.String(), thinking.String()
	u := msg.Usage
	var read *int
	if u.JSON.CacheReadInputTokens.Valid() {
		n := int(u.CacheReadInputTokens)
		read = &n
	}
	out.Usage = remote.MessagesUsage(int(u.InputTokens), int(u.OutputTokens), read, int(u.CacheCreationInputTokens))
	return out
}
