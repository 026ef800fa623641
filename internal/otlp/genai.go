package otlp

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

// Attributes.

func str(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

func integer(k string, v int64) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v}}}
}

func boolean(k string, v bool) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: v}}}
}

func double(k string, v float64) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v}}}
}

func strList(k string, vs []string) *commonpb.KeyValue {
	arr := &commonpb.ArrayValue{Values: make([]*commonpb.AnyValue, len(vs))}
	for i, v := range vs {
		arr.Values[i] = &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}
	}
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: arr}}}
}

// attrsOf makes the attributes of a span event from a log event's data: its
// top-level fields in key order, strings, integers, numbers and booleans as
// themselves, lists and objects as their JSON text. Null is left out.
func attrsOf(data json.RawMessage) []*commonpb.KeyValue {
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if dec.Decode(&fields) != nil {
		return nil
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []*commonpb.KeyValue
	for _, k := range keys {
		if kv := attributeOf(k, fields[k]); kv != nil {
			out = append(out, kv)
		}
	}
	return out
}

func attributeOf(k string, raw json.RawMessage) *commonpb.KeyValue {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil
	}
	// Read by its first byte: a list or an object stays the JSON text it is
	// (a file's content can be megabytes), never decoded.
	switch c := raw[0]; {
	case c == 'n':
		return nil
	case c == '"':
		var v string
		if json.Unmarshal(raw, &v) != nil {
			return nil
		}
		return str(k, v)
	case c == 't' || c == 'f':
		var v bool
		if json.Unmarshal(raw, &v) != nil {
			return nil
		}
		return boolean(k, v)
	case c == '{' || c == '[':
		if trace.IsCompact(raw) {
			return str(k, string(raw))
		}
		var b bytes.Buffer
		if json.Compact(&b, raw) != nil {
			return nil
		}
		return str(k, b.String())
	default:
		n := json.Number(raw)
		if v, err := n.Int64(); err == nil {
			return integer(k, v)
		}
		if f, err := n.Float64(); err == nil {
			return double(k, f)
		}
		return nil
	}
}

// The GenAI conventions' message format (gen_ai.input.messages,
// gen_ai.output.messages, gen_ai.system_instructions), as their JSON
// schemas give it.

type genMessage struct {
	Role         string `json:"role"`
	Parts        []any  `json:"parts"`
	FinishReason string `json:"finish_reason,omitempty"`
}

type textPart struct {
	Type    string `json:"type"`
	Content string `json:"content"`
}

type toolCallPart struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments any    `json:"arguments"`
}

type toolResponsePart struct {
	Type     string `json:"type"`
	ID       string `json:"id"`
	Response string `json:"response"`
}

// Finish reasons of the output messages' schema.
const (
	finishStop     = "stop"
	finishToolCall = "tool_call"
)

func systemInstructions(prompt string) string {
	return jsonText([]textPart{{Type: "text", Content: prompt}})
}

// genMessageOf writes a message in the GenAI format: text as a text part,
// each tool call as a tool_call part, a tool result as role "tool" with a
// tool_call_response part.
func genMessageOf(m *trace.Message) genMessage {
	out := genMessage{Role: m.Role, Parts: []any{}}
	if m.Role == string(delegation.RoleTool) {
		id := ""
		if m.ToolCallID != nil {
			id = *m.ToolCallID
		}
		out.Parts = append(out.Parts, toolResponsePart{Type: "tool_call_response", ID: id, Response: m.Content})
		return out
	}
	if m.Content != "" || len(m.ToolCalls) == 0 {
		out.Parts = append(out.Parts, textPart{Type: "text", Content: m.Content})
	}
	for _, c := range m.ToolCalls {
		text := argsText(c.Args)
		var args any = json.RawMessage(text)
		if !json.Valid([]byte(text)) {
			args = text // not JSON: kept as the text it is
		}
		out.Parts = append(out.Parts, toolCallPart{Type: "tool_call", ID: c.ID, Name: c.Name, Arguments: args})
	}
	return out
}

// outputOf is an assistant message as a call's output, with why the model
// stopped. A reasoning model's thinking is its own part, first, as it came:
// it is output only, since the model never receives it back.
func outputOf(m *trace.Message) genMessage {
	out := genMessageOf(m)
	if m.Reasoning != "" {
		out.Parts = append([]any{textPart{Type: "reasoning", Content: m.Reasoning}}, out.Parts...)
	}
	out.FinishReason = finishReasonOf(m)
	return out
}

func finishReasonOf(m *trace.Message) string {
	if len(m.ToolCalls) > 0 {
		return finishToolCall
	}
	return finishStop
}

func textMessage(role, text, finish string) genMessage {
	return genMessage{Role: role, Parts: []any{textPart{Type: "text", Content: text}}, FinishReason: finish}
}

// argsText is a tool call's arguments as compact JSON text.
func argsText(raw json.RawMessage) string {
	var b bytes.Buffer
	if len(raw) == 0 {
		return "{}"
	}
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// oiMessage writes a message as OpenInference's flattened attributes under
// prefix (e.g. "llm.input_messages.3.").
func oiMessage(prefix, role, content string, calls []delegation.ToolCall, toolCallID *string) []*commonpb.KeyValue {
	out := []*commonpb.KeyValue{str(prefix+"message.role", role)}
	if content != "" || len(calls) == 0 {
		out = append(out, str(prefix+"message.content", content))
	}
	if toolCallID != nil {
		out = append(out, str(prefix+"message.tool_call_id", *toolCallID))
	}
	for k, c := range calls {
		p := prefix + "message.tool_calls." + strconv.Itoa(k) + ".tool_call."
		out = append(out, str(p+"id", c.ID), str(p+"function.name", c.Name),
			str(p+"function.arguments", argsText(c.Args)))
	}
	return out
}
