package ingest

import (
	"encoding/json"
	"maps"
	"sort"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
)

// OpenTelemetry GenAI spans (semantic conventions for generative AI): a
// model call is a span with gen_ai.operation.name "chat" (or
// text_completion, generate_content) holding gen_ai.input.messages,
// gen_ai.output.messages and gen_ai.system_instructions as JSON; a tool
// call is "execute_tool" with gen_ai.tool.name, gen_ai.tool.call.id,
// gen_ai.tool.call.arguments and gen_ai.tool.call.result; an agent's run is
// "invoke_agent" with gen_ai.agent.name. The studio's own OTLP export is
// written this way.

// genMessage is a message of gen_ai.input.messages / output.messages.
type genMessage struct {
	Role  string    `json:"role"`
	Parts []genPart `json:"parts"`
}

type genPart struct {
	Type      string          `json:"type"`
	Content   json.RawMessage `json:"content"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Response  json.RawMessage `json:"response"`
	Result    json.RawMessage `json:"result"`
}

func genAICall(sp *Span) (CallInput, CallOutput) {
	in := CallInput{Model: attrString(sp.Attrs, "gen_ai.request.model"), At: sp.Start}
	out := CallOutput{At: sp.End}
	var sys []genPart
	if json.Unmarshal([]byte(attrString(sp.Attrs, "gen_ai.system_instructions")), &sys) == nil {
		var parts []string
		for _, p := range sys {
			if t := rawText(p.Content); t != "" {
				parts = append(parts, t)
			}
		}
		in.System = strings.Join(parts, "\n\n")
	}
	var msgs []genMessage
	_ = json.Unmarshal([]byte(attrString(sp.Attrs, "gen_ai.input.messages")), &msgs)
	var conv []Message
	for _, m := range msgs {
		conv = append(conv, genMessagesOf(m)...)
	}
	system, rest := splitSystem(conv)
	if in.System == "" {
		in.System = system
	}
	in.Input = rest
	var defs []delegation.ToolDef
	if json.Unmarshal([]byte(attrString(sp.Attrs, "gen_ai.tool.definitions")), &defs) == nil {
		in.Tools = defs
	}
	if sp.StatusError {
		out.Error = orDefault(sp.StatusMessage, "the model call failed")
	} else {
		var outs []genMessage
		if json.Unmarshal([]byte(attrString(sp.Attrs, "gen_ai.output.messages")), &outs) == nil && len(outs) > 0 {
			ms := genMessagesOf(outs[0])
			if len(ms) > 0 {
				m := ms[0]
				m.Role = delegation.RoleAssistant
				out.Output = &m
			}
		}
		if out.Output == nil {
			out.Output = &Message{Role: delegation.RoleAssistant}
		}
	}
	in.Counted = countedOf(sp)
	out.Files = changesFromEvents(sp)
	p, okP := attrInt(sp.Attrs, "gen_ai.usage.input_tokens")
	c, okC := attrInt(sp.Attrs, "gen_ai.usage.output_tokens")
	// The studio's own export writes a scripted model's usage from its own
	// count (delegation.input_tokens beside it): no endpoint reported it, so
	// the import has none, as the session had none.
	ownScripted := in.Counted != nil && attrString(sp.Attrs, "gen_ai.provider.name") == "scripted"
	if (okP || okC) && !ownScripted {
		out.Usage = &delegation.Usage{PromptTokens: p, CompletionTokens: c}
		out.Usage.CachedTokens, out.Usage.CachedReported = attrInt(sp.Attrs, "gen_ai.usage.cache_read.input_tokens")
		out.Usage.ReasoningTokens, _ = attrInt(sp.Attrs, "gen_ai.usage.reasoning.output_tokens")
		// The semantic conventions' name, then the older flat one some
		// instrumentations still write.
		out.Usage.CacheCreationTokens, _ = attrIntOf(sp.Attrs, "gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.cache_creation_input_tokens")
	}
	out.Response = responseOf(sp, in.Counted != nil)
	return in, out
}

// responseOf reads what the endpoint said of a call's answer:
// gen_ai.response.id, .model and the first of .finish_reasons, as sent.
// Where no endpoint said anything (a scripted call, a log stored before
// these were kept) the studio's own export writes a finish reason of its
// own making and no id or model (otlp's responseAttrs): the import has
// none, as the session had none.
func responseOf(sp *Span, own bool) *delegation.ResponseMeta {
	id, model := attrString(sp.Attrs, "gen_ai.response.id"), attrString(sp.Attrs, "gen_ai.response.model")
	finish := ""
	if reasons := attrStrings(sp.Attrs, "gen_ai.response.finish_reasons"); len(reasons) > 0 && (!own || id != "" || model != "") {
		finish = reasons[0]
	}
	return delegation.MetaOf(id, model, finish)
}

// exportedOf reads what the studio's own export says of an agent's end
// (an invoke_agent span with delegation.status); nil for anyone else's.
func exportedOf(sp *Span) *Exported {
	if _, ok := sp.Attrs["delegation.status"]; !ok {
		return nil
	}
	e := &Exported{}
	var outs []genMessage
	if json.Unmarshal([]byte(attrString(sp.Attrs, "gen_ai.output.messages")), &outs) == nil && len(outs) > 0 {
		e.Receipt, e.HasReceipt = partsText(outs[0].Parts), true
	}
	e.Returned, e.HeldBack = attrStrings(sp.Attrs, "delegation.returned"), attrStrings(sp.Attrs, "delegation.held_back")
	e.Code = attrString(sp.Attrs, "delegation.code")
	return e
}

// attrStrings is a string list attribute ([] when empty); nil when the span
// has none.
func attrStrings(attrs map[string]any, key string) []string {
	v, ok := attrs[key].([]any)
	if !ok {
		return nil
	}
	out := []string{}
	for _, x := range v {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// countedOf reads what the studio's own export counted of a call (its
// delegation.* attributes); nil for anyone else's span.
func countedOf(sp *Span) *Counted {
	input, ok := attrInt(sp.Attrs, "delegation.input_tokens")
	var tools []delegation.ToolCost
	if !ok || json.Unmarshal([]byte(attrString(sp.Attrs, "delegation.tools")), &tools) != nil {
		return nil
	}
	c := &Counted{Tools: tools, InputTokens: input, AgentID: attrString(sp.Attrs, "delegation.agent_id")}
	c.SystemTokens, _ = attrInt(sp.Attrs, "delegation.system_tokens")
	c.ToolTokens, _ = attrInt(sp.Attrs, "delegation.tool_tokens")
	c.MessageTokens, _ = attrInt(sp.Attrs, "delegation.message_tokens")
	c.InheritedTokens, _ = attrInt(sp.Attrs, "delegation.inherited_tokens")
	c.CachedPrefixTokens, _ = attrInt(sp.Attrs, "delegation.cached_prefix_tokens")
	var price delegation.Price
	if json.Unmarshal([]byte(attrString(sp.Attrs, "delegation.price")), &price) == nil {
		c.Price = &price
	}
	c.Purpose = delegation.Purpose(attrString(sp.Attrs, "delegation.purpose"))
	c.OutputTokens, _ = attrInt(sp.Attrs, "delegation.output_tokens")
	var sum Summarized
	if json.Unmarshal([]byte(attrString(sp.Attrs, "delegation.summarization")), &sum) == nil {
		c.Summarized = &sum
	}
	return c
}

// genMessagesOf turns one GenAI message into ours: its text parts joined,
// its tool_call parts as tool calls; a tool role's tool_call_response parts
// become one tool message each.
func genMessagesOf(m genMessage) []Message {
	role := roleOf(m.Role)
	if role == delegation.RoleTool {
		var out []Message
		for _, p := range m.Parts {
			if p.Type == "tool_call_response" {
				body := p.Response
				if len(body) == 0 {
					body = p.Result
				}
				out = append(out, Message{Role: delegation.RoleTool, Content: rawText(body), ToolCallID: p.ID})
			}
		}
		if len(out) == 0 {
			out = append(out, Message{Role: delegation.RoleTool, Content: partsText(m.Parts)})
		}
		return out
	}
	msg := Message{Role: role, Content: partsText(m.Parts)}
	for _, p := range m.Parts {
		if p.Type == "tool_call" {
			msg.ToolCalls = append(msg.ToolCalls, delegation.ToolCall{ID: p.ID, Name: p.Name, Args: argsJSON(p.Arguments)})
		}
	}
	return []Message{msg}
}

func partsText(parts []genPart) string {
	var texts []string
	for _, p := range parts {
		if p.Type == "text" || p.Type == "" {
			texts = append(texts, rawText(p.Content))
		}
	}
	return strings.Join(texts, "\n")
}

// rawText is a JSON string's text, or the JSON itself.
func rawText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return strings.TrimSpace(string(raw))
}

// argsJSON is a tool call's arguments: an object as given, or a JSON string
// holding the object's text.
func argsJSON(raw json.RawMessage) json.RawMessage {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return json.RawMessage(s)
	}
	return raw
}

func genAITool(sp *Span) ToolResult {
	r := ToolResult{Name: attrString(sp.Attrs, "gen_ai.tool.name"), CallID: attrString(sp.Attrs, "gen_ai.tool.call.id"),
		Args: json.RawMessage(attrString(sp.Attrs, "gen_ai.tool.call.arguments"))}
	if r.Name == "" {
		r.Name = strings.TrimPrefix(sp.Name, "execute_tool ")
	}
	if v, ok := sp.Attrs["gen_ai.tool.call.result"]; ok {
		r.Result, r.HasResult = attrText(v), true
	}
	r.Files = changesFromEvents(sp)
	if sp.StatusError {
		r.IsError, r.Error = true, orDefault(sp.StatusMessage, "the tool failed")
		if !r.HasResult {
			r.Result, r.HasResult = r.Error, true
		}
	}
	return r
}

// initialFilesOf is the files a session began with, as the studio's own
// export says them on its root span (delegation.initial_files); nil when
// it does not.
func initialFilesOf(sp *Span) map[string]string {
	var files map[string]string
	if json.Unmarshal([]byte(attrString(sp.Attrs, "delegation.initial_files")), &files) != nil || len(files) == 0 {
		return nil
	}
	return files
}

// changesFromEvents is what a tool span's files.changed events changed (the
// studio's own export keeps them on the tool call, or the task call whose
// child's changes came back), in order; nil when it has none.
func changesFromEvents(sp *Span) []delegation.FileChange {
	var out []delegation.FileChange
	for _, e := range sp.Events {
		if e.Name != string(delegation.EventFilesChanged) {
			continue
		}
		var changes []delegation.FileChange
		if json.Unmarshal([]byte(attrString(e.Attrs, "changes")), &changes) == nil {
			out = append(out, changes...)
		}
	}
	return out
}

// filesFromEvents reads an agent span's files.changed events (the studio's
// own export keeps the log's files.changed on the span whose work changed
// the files: the agent's own, or its tool, task and summary calls'), with
// their changes as JSON, into the files they leave; nil when it has none.
func filesFromEvents(base map[string]string, spans ...*Span) map[string]string {
	var files map[string]string
	if base != nil {
		files = maps.Clone(base)
	}
	var events []SpanEvent
	for _, sp := range spans {
		events = append(events, sp.Events...)
	}
	sort.SliceStable(events, func(i, j int) bool { return events[i].At.Before(events[j].At) })
	for _, e := range events {
		if e.Name != string(delegation.EventFilesChanged) {
			continue
		}
		var changes []delegation.FileChange
		if json.Unmarshal([]byte(attrString(e.Attrs, "changes")), &changes) != nil {
			continue
		}
		if files == nil {
			files = map[string]string{}
		}
		for _, c := range changes {
			if c.Deleted {
				delete(files, c.Path)
			} else {
				files[c.Path] = c.Content
			}
		}
	}
	return files
}
