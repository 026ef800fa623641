package ingest

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
)

// OpenInference spans (Arize's conventions, written by
// @arizeai/openinference-instrumentation-* and others): a model call is an
// LLM span with its messages flattened into llm.input_messages.N.message.*
// and llm.output_messages.N.message.*; a tool call is a TOOL span with its
// arguments in input.value and its result in output.value. LangChain's
// instrumentation also puts the messages, serialized by LangChain, in
// input.value and output.value: that form keeps what the flattened keys
// lose (content given as a list of blocks, tool-call ids, a tool message's
// tool_call_id), so it is read first and the flattened keys are the
// fallback.

func openInferenceCall(sp *Span) (CallInput, CallOutput) {
	in := CallInput{Model: attrString(sp.Attrs, "llm.model_name"), At: sp.Start}
	out := CallOutput{At: sp.End}
	msgs := langChainInput(attrString(sp.Attrs, "input.value"))
	flat := flatMessages(sp.Attrs, "llm.input_messages.")
	if msgs == nil || (len(flat) > 0 && len(flat) != len(msgs)) {
		msgs = flat
	}
	in.System, in.Input = splitSystem(msgs)
	in.Tools = openInferenceTools(sp.Attrs)
	if sp.StatusError {
		out.Error = orDefault(sp.StatusMessage, "the model call failed")
	} else {
		o := langChainOutput(attrString(sp.Attrs, "output.value"))
		if o == nil {
			if flatOut := flatMessages(sp.Attrs, "llm.output_messages."); len(flatOut) > 0 {
				o = &flatOut[0]
			}
		}
		if o == nil {
			o = &Message{Role: delegation.RoleAssistant, Content: attrString(sp.Attrs, "output.value")}
		}
		out.Output = o
	}
	p, okP := attrInt(sp.Attrs, "llm.token_count.prompt")
	c, okC := attrInt(sp.Attrs, "llm.token_count.completion")
	if okP || okC {
		out.Usage = &delegation.Usage{PromptTokens: p, CompletionTokens: c}
		out.Usage.CachedTokens, out.Usage.CachedReported = attrInt(sp.Attrs, "llm.token_count.prompt_details.cache_read")
		out.Usage.CacheCreationTokens, _ = attrInt(sp.Attrs, "llm.token_count.prompt_details.cache_write")
	}
	return in, out
}

// splitSystem takes the system messages at the head of a conversation out
// as the system prompt.
func splitSystem(msgs []Message) (string, []Message) {
	var sys []string
	i := 0
	for ; i < len(msgs) && msgs[i].Role == "system"; i++ {
		if msgs[i].Content != "" {
			sys = append(sys, msgs[i].Content)
		}
	}
	return strings.Join(sys, "\n\n"), msgs[i:]
}

// flatMessages reads OpenInference's flattened messages under prefix
// ("llm.input_messages."): N.message.role, .content, .contents.K.
// message_content.text, .tool_calls.K.tool_call.{id,function.name,
// function.arguments}, .tool_call_id.
func flatMessages(attrs map[string]any, prefix string) []Message {
	byIdx := map[int]*Message{}
	calls := map[int]map[int]*delegation.ToolCall{}
	contents := map[int]map[int]string{}
	for k, v := range attrs {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		rest := k[len(prefix):]
		dot := strings.IndexByte(rest, '.')
		if dot < 0 {
			continue
		}
		n, err := strconv.Atoi(rest[:dot])
		if err != nil || n < 0 || n > 1<<20 {
			continue
		}
		m := byIdx[n]
		if m == nil {
			m = &Message{}
			byIdx[n] = m
		}
		field := strings.TrimPrefix(rest[dot+1:], "message.")
		val := attrText(v)
		switch {
		case field == "role":
			m.Role = roleOf(val)
		case field == "content":
			m.Content = val
		case field == "tool_call_id":
			m.ToolCallID = val
		case strings.HasPrefix(field, "contents."):
			idx, sub, ok := indexed(strings.TrimPrefix(field, "contents."))
			if ok && sub == "message_content.text" {
				if contents[n] == nil {
					contents[n] = map[int]string{}
				}
				contents[n][idx] = val
			}
		case strings.HasPrefix(field, "tool_calls."):
			idx, sub, ok := indexed(strings.TrimPrefix(field, "tool_calls."))
			if !ok {
				continue
			}
			if calls[n] == nil {
				calls[n] = map[int]*delegation.ToolCall{}
			}
			c := calls[n][idx]
			if c == nil {
				c = &delegation.ToolCall{}
				calls[n][idx] = c
			}
			switch strings.TrimPrefix(sub, "tool_call.") {
			case "id":
				c.ID = val
			case "function.name":
				c.Name = val
			case "function.arguments":
				c.Args = json.RawMessage(val)
			}
		}
	}
	if len(byIdx) == 0 {
		return nil
	}
	idxs := make([]int, 0, len(byIdx))
	for n := range byIdx {
		idxs = append(idxs, n)
	}
	sort.Ints(idxs)
	out := make([]Message, 0, len(idxs))
	for _, n := range idxs {
		m := byIdx[n]
		if m.Content == "" && len(contents[n]) > 0 {
			m.Content = joinIndexed(contents[n])
		}
		if cs := calls[n]; len(cs) > 0 {
			ks := make([]int, 0, len(cs))
			for k := range cs {
				ks = append(ks, k)
			}
			sort.Ints(ks)
			for _, k := range ks {
				m.ToolCalls = append(m.ToolCalls, *cs[k])
			}
		}
		out = append(out, *m)
	}
	return out
}

func indexed(s string) (int, string, bool) {
	dot := strings.IndexByte(s, '.')
	if dot < 0 {
		return 0, "", false
	}
	n, err := strconv.Atoi(s[:dot])
	return n, s[dot+1:], err == nil && n >= 0
}

func joinIndexed(m map[int]string) string {
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = m[k]
	}
	return strings.Join(parts, "\n")
}

// roleOf maps the roles conventions use to ours; "system" stays, for
// splitSystem to take out.
func roleOf(r string) delegation.Role {
	switch strings.ToLower(r) {
	case "user", "human":
		return delegation.RoleUser
	case "assistant", "ai", "model":
		return delegation.RoleAssistant
	case "tool", "function", "ipython":
		return delegation.RoleTool
	case "system", "developer":
		return "system"
	}
	return delegation.RoleUser
}

// openInferenceTools reads the tool definitions a call received
// (llm.tools.N.tool.json_schema), when the instrumentation records them.
func openInferenceTools(attrs map[string]any) []delegation.ToolDef {
	byIdx := map[int]delegation.ToolDef{}
	for k, v := range attrs {
		rest, ok := strings.CutPrefix(k, "llm.tools.")
		if !ok {
			continue
		}
		n, sub, ok := indexed(rest)
		if !ok || sub != "tool.json_schema" {
			continue
		}
		byIdx[n] = toolDefOf(attrText(v))
	}
	idxs := make([]int, 0, len(byIdx))
	for n := range byIdx {
		idxs = append(idxs, n)
	}
	sort.Ints(idxs)
	var out []delegation.ToolDef
	for _, n := range idxs {
		out = append(out, byIdx[n])
	}
	return out
}

// toolDefOf reads a tool definition in OpenAI's form ({"type":"function",
// "function":{…}}) or flat ({"name","description","parameters"}).
func toolDefOf(text string) delegation.ToolDef {
	var d struct {
		delegation.ToolDef
		Function *delegation.ToolDef `json:"function"`
	}
	if json.Unmarshal([]byte(text), &d) != nil {
		return delegation.ToolDef{Name: text}
	}
	if d.Function != nil {
		return *d.Function
	}
	return d.ToolDef
}

func openInferenceTool(sp *Span) ToolResult {
	r := ToolResult{Name: attrString(sp.Attrs, "tool.name")}
	if r.Name == "" {
		r.Name = sp.Name
	}
	r.Args = json.RawMessage(attrString(sp.Attrs, "input.value"))
	if id := attrString(sp.Attrs, "tool_call.id"); id != "" {
		r.CallID = id
	}
	if v, ok := sp.Attrs["output.value"]; ok {
		res := langChainToolOutput(attrText(v))
		r.Result, r.HasResult, r.Files = res.content, true, res.files
		if res.callID != "" && r.CallID == "" {
			r.CallID = res.callID
		}
		if res.isError {
			r.IsError = true
		}
	}
	if sp.StatusError {
		r.IsError, r.Error = true, orDefault(sp.StatusMessage, "the tool failed")
		if !r.HasResult {
			r.Result, r.HasResult = r.Error, true
		}
	}
	return r
}

// agentName is the agent a span says it runs in: LangChain's
// metadata.lc_agent_name, gen_ai.agent.name, OpenInference's agent.name.
func agentName(sp *Span) string {
	if n := attrString(sp.Attrs, "gen_ai.agent.name"); n != "" {
		return n
	}
	if n := attrString(sp.Attrs, "agent.name"); n != "" {
		return n
	}
	if md := attrString(sp.Attrs, "metadata"); md != "" {
		var m struct {
			Agent string `json:"lc_agent_name"`
		}
		if json.Unmarshal([]byte(md), &m) == nil && m.Agent != "" {
			return m.Agent
		}
	}
	return ""
}

// LangChain's serialization: {"lc":1,"type":"constructor","id":[…,
// "HumanMessage"],"kwargs":{…}}.
type lcObject struct {
	LC     int             `json:"lc"`
	Type   string          `json:"type"`
	ID     []string        `json:"id"`
	Kwargs json.RawMessage `json:"kwargs"`
	// a plain message, {"role","content"}, as some inputs are given
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	// LangGraph's Command, {"lg_name":"Command","update":{…}}
	LGName string          `json:"lg_name"`
	Update json.RawMessage `json:"update"`
}

type lcKwargs struct {
	Content   json.RawMessage `json:"content"`
	ToolCalls []struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"tool_calls"`
	ToolCallID string `json:"tool_call_id"`
	Status     string `json:"status"`
}

// langChainInput reads {"messages":[[msg, …]]} (a chat model's input);
// nil when the text is not that.
func langChainInput(text string) []Message {
	if !strings.HasPrefix(strings.TrimSpace(text), "{") {
		return nil
	}
	var v struct {
		Messages json.RawMessage `json:"messages"`
	}
	if json.Unmarshal([]byte(text), &v) != nil || len(v.Messages) == 0 {
		return nil
	}
	var batches [][]lcObject
	if json.Unmarshal(v.Messages, &batches) != nil {
		var flat []lcObject
		if json.Unmarshal(v.Messages, &flat) != nil {
			return nil
		}
		batches = [][]lcObject{flat}
	}
	if len(batches) != 1 {
		return nil
	}
	out := make([]Message, 0, len(batches[0]))
	for _, o := range batches[0] {
		m, ok := lcMessage(o)
		if !ok {
			return nil
		}
		out = append(out, m)
	}
	return out
}

// langChainOutput reads {"generations":[[{"message":…}]]}.
func langChainOutput(text string) *Message {
	if !strings.HasPrefix(strings.TrimSpace(text), "{") {
		return nil
	}
	var v struct {
		Generations [][]struct {
			Text    string    `json:"text"`
			Message *lcObject `json:"message"`
		} `json:"generations"`
	}
	if json.Unmarshal([]byte(text), &v) != nil || len(v.Generations) == 0 || len(v.Generations[0]) == 0 {
		return nil
	}
	g := v.Generations[0][0]
	if g.Message == nil {
		return &Message{Role: delegation.RoleAssistant, Content: g.Text}
	}
	m, ok := lcMessage(*g.Message)
	if !ok {
		return nil
	}
	m.Role = delegation.RoleAssistant
	return &m
}

func lcMessage(o lcObject) (Message, bool) {
	if o.LC == 0 && o.Role != "" {
		return Message{Role: roleOf(o.Role), Content: contentText(o.Content)}, true
	}
	if o.LC != 1 || len(o.ID) == 0 {
		return Message{}, false
	}
	var role delegation.Role
	switch strings.TrimSuffix(o.ID[len(o.ID)-1], "Chunk") {
	case "HumanMessage":
		role = delegation.RoleUser
	case "AIMessage":
		role = delegation.RoleAssistant
	case "SystemMessage":
		role = "system"
	case "ToolMessage", "FunctionMessage":
		role = delegation.RoleTool
	default:
		return Message{}, false
	}
	var kw lcKwargs
	if json.Unmarshal(o.Kwargs, &kw) != nil {
		return Message{}, false
	}
	m := Message{Role: role, Content: contentText(kw.Content), ToolCallID: kw.ToolCallID, IsError: kw.Status == "error"}
	for _, c := range kw.ToolCalls {
		m.ToolCalls = append(m.ToolCalls, delegation.ToolCall{ID: c.ID, Name: c.Name, Args: c.Args})
	}
	return m, true
}

// contentText is a message's text: a string, or the text of its blocks,
// one per line (what a model reads of [{"type":"text","text":…}]).
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []map[string]any
	if json.Unmarshal(raw, &blocks) != nil {
		return strings.TrimSpace(string(raw))
	}
	var parts []string
	for _, b := range blocks {
		switch t := b["text"].(type) {
		case string:
			parts = append(parts, t)
		default:
			if c, ok := b["content"].(string); ok {
				parts = append(parts, c)
			}
		}
	}
	return strings.Join(parts, "\n")
}

type toolOutput struct {
	content string
	callID  string
	isError bool
	files   []delegation.FileChange
}

// langChainToolOutput reads a TOOL span's output.value: {"output": X} where
// X is a ToolMessage, a LangGraph Command whose update holds the
// ToolMessage (and, for deepagents, the files the tool wrote), or plain
// text; anything else is the result as given.
func langChainToolOutput(text string) toolOutput {
	var wrap struct {
		Output json.RawMessage `json:"output"`
	}
	if !strings.HasPrefix(strings.TrimSpace(text), "{") || json.Unmarshal([]byte(text), &wrap) != nil || len(wrap.Output) == 0 {
		return toolOutput{content: text}
	}
	var s string
	if json.Unmarshal(wrap.Output, &s) == nil {
		return toolOutput{content: s}
	}
	var o lcObject
	if json.Unmarshal(wrap.Output, &o) != nil {
		return toolOutput{content: string(wrap.Output)}
	}
	if o.LGName == "Command" {
		var u struct {
			Files    map[string]json.RawMessage `json:"files"`
			Messages []lcObject                 `json:"messages"`
		}
		if json.Unmarshal(o.Update, &u) != nil {
			return toolOutput{content: string(wrap.Output)}
		}
		out := toolOutput{files: fileChanges(u.Files)}
		for _, m := range u.Messages {
			if msg, ok := lcMessage(m); ok && msg.Role == delegation.RoleTool {
				out.content, out.callID, out.isError = msg.Content, msg.ToolCallID, msg.IsError
			}
		}
		return out
	}
	if msg, ok := lcMessage(o); ok {
		return toolOutput{content: msg.Content, callID: msg.ToolCallID, isError: msg.IsError}
	}
	return toolOutput{content: string(wrap.Output)}
}

// fileChanges reads deepagents' files state: path → {"content": text or
// lines, …}, or null for a deleted file.
func fileChanges(files map[string]json.RawMessage) []delegation.FileChange {
	if files == nil {
		return nil
	}
	out := []delegation.FileChange{}
	for _, p := range sortedRawKeys(files) {
		raw := files[p]
		if string(raw) == "null" {
			out = append(out, delegation.FileChange{Path: p, Deleted: true})
			continue
		}
		var f struct {
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(raw, &f) != nil {
			continue
		}
		var text string
		if json.Unmarshal(f.Content, &text) != nil {
			var lines []string
			if json.Unmarshal(f.Content, &lines) != nil {
				continue
			}
			text = strings.Join(lines, "\n")
		}
		out = append(out, delegation.FileChange{Path: p, Content: text})
	}
	return out
}

func sortedRawKeys(m map[string]json.RawMessage) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// finalFiles reads the files of a graph's final state from its root span's
// output.value ({"files": {…}, "messages": […]}), when it has them.
func finalFiles(sp *Span) map[string]string {
	text := attrString(sp.Attrs, "output.value")
	if !strings.HasPrefix(strings.TrimSpace(text), "{") {
		return nil
	}
	var st struct {
		Files map[string]json.RawMessage `json:"files"`
	}
	if json.Unmarshal([]byte(text), &st) != nil || st.Files == nil {
		return nil
	}
	out := map[string]string{}
	for _, c := range fileChanges(st.Files) {
		if !c.Deleted {
			out[c.Path] = c.Content
		}
	}
	return out
}

// attrString is a string attribute ("" when absent); other types as text.
func attrString(attrs map[string]any, k string) string {
	v, ok := attrs[k]
	if !ok {
		return ""
	}
	return attrText(v)
}

func attrText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	case []byte:
		return string(x)
	case float64, int64, bool:
		return fmt.Sprint(x)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// attrIntOf is the first of the keys that holds an integer.
func attrIntOf(attrs map[string]any, keys ...string) (int, bool) {
	for _, k := range keys {
		if n, ok := attrInt(attrs, k); ok {
			return n, true
		}
	}
	return 0, false
}

func attrInt(attrs map[string]any, k string) (int, bool) {
	switch x := attrs[k].(type) {
	case int64:
		return int(x), true
	case float64:
		return int(x), true
	case string:
		n, err := strconv.Atoi(x)
		return n, err == nil
	}
	return 0, false
}
