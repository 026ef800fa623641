package templates

import (
	"context"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// TeamsPage is the list of teams, with the import form and the lessons a
// team can be cloned from.
type TeamsPage struct {
	Page
	Teams   []TeamRow
	Lessons []LessonOption
	// What the user pasted, kept when the import comes back with errors.
	ImportText string
	ImportErrs []FieldError
}

// TeamRow is a line of the teams page.
type TeamRow struct {
	ID, Name, Title string
	Subagents       int
	Runnable        bool // it has a prompt, and a script or a real model
	UpdatedAt       time.Time
}

// TeamForm is the team editor: every field as the user typed it (numbers
// and JSON included, so nothing typed is lost when the form comes back with
// errors), the problems at their fields, and the preview beside it.
type TeamForm struct {
	Page
	ID string // "" for a team not saved yet

	Name, Title, Description, Tokenizer string
	Prompt                              string
	Agent                               AgentForm
	Model                               ModelForm
	Subagents                           []SubagentForm
	Script, Files                       string // JSON, as typed

	// StackTools are the tools a main agent may have, in order (the stack,
	// then task); SubagentTools those a subagent may list.
	StackTools, SubagentTools []string
	// Endpoints are the names of the model endpoints the studio was
	// started with, which the team may name.
	Endpoints []string
	// AnthropicEndpoints are those of them that speak Anthropic's
	// Messages API, which their choices say.
	AnthropicEndpoints []string

	Preview TeamPreview
	// Notice is said above the form: why a run did not start, say.
	Notice string
	// Saved: the page follows a save, and says so.
	Saved bool
	// Runnable: it has a prompt, and a script or a real model.
	Runnable bool
	// NeedsScript: a run was refused for want of a script; the page offers
	// to fill one in, or to run against an endpoint.
	NeedsScript bool
	// RunRefused: the page answers a Run that did not start (the team as
	// saved is kept), not a save.
	RunRefused bool
	// Runs are the team's runs, newest first; Source what it was cloned from.
	Runs   []TeamRunRow
	Source TeamSource
	// TopErrors are the problems that belong to no input of the form.
	TopErrors []FieldError
	errs      map[string][]string
}

// TeamRunRow is one run of a team, with the comparisons it offers.
type TeamRunRow struct {
	SessionID, Name, Status        string
	CreatedAt                      time.Time
	Agents, Calls, Tokens          int
	ComparePrevious, CompareSource string // "" when there is nothing to compare with
}

// TeamSource is what a team was cloned from: a lesson or a session, and
// the session to compare its runs with ("" when there is none).
type TeamSource struct {
	Label, URL, SessionID string
}

// AgentForm is the main agent's part of the form.
type AgentForm struct {
	SystemPrompt   string
	Size           Size // of the system prompt
	Tools          []string
	GeneralPurpose bool
	MaxSteps       string
	MaxConcurrency string
	FilesMerge     string
	Compat         string // "" (ours) or "deepagents"
	MaxTokens      string // summarization threshold; empty or 0: 170,000
	KeepMessages   string
	TimeoutMS      string
	Model, BaseURL string // the main agent's own model, over the team's
}

// ModelForm says where the model's answers come from.
type ModelForm struct {
	Provider, Model, Endpoint, BaseURL, APIKeyEnv string
	NativeJSONSchema                              bool
}

// SubagentForm is one subagent spec as typed.
type SubagentForm struct {
	Name, Description, SystemPrompt, Mode string
	Size                                  Size // of the system prompt
	Tools                                 []string
	Model                                 string
	Endpoint                              string // a configured endpoint of its own, by name
	BaseURL, APIKeyEnv                    string // an endpoint of its own, and its key variable (studio run only)
	Skills                                string // comma-separated
	MaxSteps, TimeoutMS                   string
	ResponseFormat                        string // JSON, as typed
}

// Size is a text's length in characters and in tokens.
type Size struct {
	Chars, Tokens int
}

// sizeText says a size for a person, in the page's language.
func sizeText(ctx context.Context, s Size) string {
	return T(ctx, "size.text", "Chars", Num(ctx, s.Chars), "Tokens", Num(ctx, s.Tokens))
}

// TeamPreview is what the main agent will receive, built with the engine's
// own code from the form's contents.
type TeamPreview struct {
	Tokenizer string
	// Built says the team builds; when it does not, Problems says why.
	Built    bool
	Problems []FieldError
	Warnings []FieldError
	// HasTask says the main agent has the task tool.
	HasTask         bool
	TaskDescription string
	TaskSize        Size
	Tools           []ToolView // each tool definition's tokens, in order
	// TodoSection is the tokens of the section write_todos adds to the
	// main agent's system prompt, 0 without write_todos; ToolTokens counts it.
	TodoSection int
	ToolTokens  int
	Prompts     []PromptSize
}

// PromptSize is a system prompt's size, keyed by its form field.
type PromptSize struct {
	Key, Label string
	Size       Size
}

// Choice is an option of a select or a checkbox.
type Choice struct {
	Value, Label string
	On           bool
	Extra        bool // not one of the usual values: kept because it was typed
}

// SubKey is the form field of subagent i: SubKey(1, "mode") is
// "subagents[1].mode", the very name the engine's errors use.
func SubKey(i int, field string) string {
	k := "subagents[" + strconv.Itoa(i) + "]"
	if field != "" {
		k += "." + field
	}
	return k
}

// Action is where the form is sent.
func (f *TeamForm) Action() string {
	if f.ID == "" {
		return "/teams"
	}
	return "/teams/" + f.ID
}

// Heading is the page's title.
func (f *TeamForm) Heading(ctx context.Context) string {
	switch {
	case f.ID == "":
		return T(ctx, "team.new")
	case f.Title != "":
		return f.Title
	case f.Name != "":
		return f.Name
	}
	return T(ctx, "team.legend.team")
}

// inputKeys are the form's fields that can show a problem.
func (f *TeamForm) inputKeys() map[string]bool {
	keys := map[string]bool{}
	for _, k := range []string{"name", "title", "description", "tokenizer", "prompt", "script", "files", "subagents",
		"agent.system_prompt", "agent.tools", "agent.general_purpose", "agent.max_steps", "agent.max_concurrency",
		"agent.files_merge", "agent.compat", "agent.summarization.max_tokens", "agent.summarization.keep_messages",
		"agent.timeout_ms", "agent.model", "agent.base_url",
		"model.provider", "model.model", "model.endpoint", "model.base_url", "model.api_key_env", "model.native_json_schema"} {
		keys[k] = true
	}
	for i := range f.Subagents {
		for _, k := range []string{"", "name", "description", "system_prompt", "mode", "tools", "model", "endpoint", "base_url", "api_key_env", "skills",
			"max_steps", "timeout_ms", "response_format"} {
			keys[SubKey(i, k)] = true
		}
	}
	return keys
}

// SetErrors places each problem at the input it is about: a field such as
// "subagents[1].tools[2]" or "script.main[0]" goes to the nearest field the
// form has ("subagents[1].tools", "script"); a problem with none goes to
// the list at the top.
func (f *TeamForm) SetErrors(errs []FieldError) {
	f.errs = map[string][]string{}
	f.TopErrors = nil
	keys := f.inputKeys()
	for _, e := range errs {
		k := e.Field
		for k != "" && !keys[k] {
			k = parentField(k)
		}
		if k == "" {
			f.TopErrors = append(f.TopErrors, e)
			continue
		}
		f.errs[k] = append(f.errs[k], e.Message)
	}
}

// parentField drops a field path's last step: "a.b[2]" → "a.b" → "a", and
// `files["/x"]` → "files" (a quoted key may hold brackets of its own).
func parentField(k string) string {
	if strings.HasSuffix(k, `"]`) {
		for i := strings.LastIndex(k, `["`); i >= 0; i = strings.LastIndex(k[:i], `["`) {
			if _, err := strconv.Unquote(k[i+1 : len(k)-1]); err == nil {
				return k[:i]
			}
		}
	}
	if strings.HasSuffix(k, "]") {
		if i := strings.LastIndexByte(k, '['); i >= 0 {
			return k[:i]
		}
	}
	if i := strings.LastIndexByte(k, '.'); i >= 0 {
		return k[:i]
	}
	return ""
}

// ErrorKeys are the fields that show problems.
func (f *TeamForm) ErrorKeys() []string {
	keys := make([]string, 0, len(f.errs))
	for k := range f.errs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// SummaryItems are the form's problems for the page's summary, each
// linking to its field, in the form's order.
func (f *TeamForm) SummaryItems() []SummaryItem {
	var out []SummaryItem
	for _, e := range f.TopErrors {
		out = append(out, SummaryItem{Field: e.Field, Message: e.Message, Href: "#team-form"})
	}
	order := f.fieldOrder()
	for _, k := range order {
		for _, m := range f.errs[k] {
			out = append(out, SummaryItem{Field: k, Message: m, Href: "#" + FieldID(k)})
		}
	}
	return out
}

// fieldOrder is the form's fields with problems, in the order the form
// shows them.
func (f *TeamForm) fieldOrder() []string {
	order := []string{"name", "title", "description", "tokenizer", "agent.system_prompt", "agent.tools", "agent.general_purpose",
		"agent.max_steps", "agent.max_concurrency", "agent.files_merge", "agent.compat", "agent.summarization.max_tokens",
		"agent.summarization.keep_messages", "agent.timeout_ms", "agent.model", "agent.base_url", "subagents"}
	for i := range f.Subagents {
		for _, k := range []string{"", "name", "mode", "description", "system_prompt", "tools", "model", "skills", "max_steps",
			"endpoint", "base_url", "api_key_env", "timeout_ms", "response_format"} {
			order = append(order, SubKey(i, k))
		}
	}
	order = append(order, "model.provider", "model.model", "model.endpoint", "model.base_url", "model.api_key_env",
		"model.native_json_schema", "prompt", "script", "files")
	var out []string
	for _, k := range order {
		if len(f.errs[k]) > 0 {
			out = append(out, k)
		}
	}
	return out
}

// FieldID is the HTML id of a form field's input, for links to it.
func FieldID(key string) string {
	r := strings.NewReplacer("[", "-", "]", "", ".", "-")
	if key == "" {
		return "team-form"
	}
	return "f-" + r.Replace(key)
}

// Errs are the problems shown at a field.
func (f *TeamForm) Errs(key string) []string { return f.errs[key] }

// ErrorCount is how many problems the form shows.
func (f *TeamForm) ErrorCount() int {
	n := len(f.TopErrors)
	for _, m := range f.errs {
		n += len(m)
	}
	return n
}

// ToolChoices are the checkboxes of a tool list: every tool offered, then
// any other name the list holds (an unknown tool stays, checked, so the
// problem can be seen and fixed).
func ToolChoices(offered, checked []string) []Choice {
	on := map[string]bool{}
	for _, n := range checked {
		on[n] = true
	}
	var out []Choice
	seen := map[string]bool{}
	for _, n := range offered {
		out = append(out, Choice{Value: n, Label: n, On: on[n]})
		seen[n] = true
	}
	for _, n := range checked {
		if !seen[n] {
			out = append(out, Choice{Value: n, Label: n, On: true, Extra: true})
			seen[n] = true
		}
	}
	return out
}

// choices builds a select's options from value, label pairs; a current
// value that is none of them is kept as an extra option.
func choices(current string, pairs ...string) []Choice {
	var out []Choice
	found := false
	for i := 0; i+1 < len(pairs); i += 2 {
		on := pairs[i] == current
		found = found || on
		out = append(out, Choice{Value: pairs[i], Label: pairs[i+1], On: on})
	}
	if !found {
		out = append(out, Choice{Value: current, Label: current, On: true, Extra: true})
	}
	return out
}

// ModeChoices are a subagent's modes; an empty mode is isolated.
func ModeChoices(ctx context.Context, mode string) []Choice {
	if mode == "" {
		mode = "isolated"
	}
	pairs := []string{"isolated", T(ctx, "choice.mode.isolated"), "fork", T(ctx, "choice.mode.fork")}
	if mode == "handoff" {
		pairs = append(pairs, "handoff", T(ctx, "choice.mode.handoff"))
	}
	return choices(mode, pairs...)
}

// MergeChoices are the files_merge settings.
func MergeChoices(ctx context.Context, v string) []Choice {
	return choices(v, "", T(ctx, "choice.merge.default"), "delta", T(ctx, "choice.merge.delta"),
		"snapshot", T(ctx, "choice.merge.snapshot"))
}

// CompatChoices are the engines a team may follow where ours deliberately
// differs.
func CompatChoices(ctx context.Context, v string) []Choice {
	return choices(v, "", T(ctx, "choice.compat.ours"), "deepagents", T(ctx, "choice.compat.deepagents"))
}

// TokenizerChoices are the tokenizers.
func TokenizerChoices(ctx context.Context, v string) []Choice {
	return choices(v, "", T(ctx, "choice.tokenizer.default"), "o200k_base", "o200k_base", "cl100k_base", "cl100k_base",
		"approx", T(ctx, "choice.tokenizer.approx"))
}

// ProviderChoices are the model providers.
func ProviderChoices(ctx context.Context, v string) []Choice {
	return choices(v, "", T(ctx, "choice.provider.default"), "scripted", T(ctx, "choice.provider.scripted"),
		"openai", T(ctx, "choice.provider.openai"), "anthropic", T(ctx, "choice.provider.anthropic"))
}

// EndpointChoices are the studio's endpoints for a team to name; none is
// empty's label ("the studio's first", "the parent's"). A name the studio
// does not have stays a choice, so that saving the form loses nothing.
func EndpointChoices(ctx context.Context, names, anthropic []string, v, none string) []Choice {
	pairs := []string{"", none}
	known := false
	for _, n := range names {
		label := n
		if slices.Contains(anthropic, n) {
			label = T(ctx, "choice.endpoint.anthropic", "Name", n)
		}
		pairs = append(pairs, n, label)
		known = known || n == v
	}
	if v != "" && !known {
		pairs = append(pairs, v, T(ctx, "choice.endpoint.unknown", "Name", v))
	}
	return choices(v, pairs...)
}
