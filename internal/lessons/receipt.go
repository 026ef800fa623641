package lessons

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

var receipt = lessonDef{
	name:    "receipt",
	title:   "The receipt: the last message with text, or a structured response",
	article: "Article 1 (the task tool), §2–§3",
	description: "Article 1 (the task tool), §2–§3: what an isolated child starts from, and what comes back as " +
		"its receipt. Compare the runs: without a response_format the receipt is the child's last message " +
		"with non-empty text (an earlier 'I just wrote a file' and an empty last message do not count), prose " +
		"that does not parse; with response_format Findings the child gets an eighth tool named after the schema " +
		"and the receipt is compact JSON.",
	variants: []variantDef{
		{name: "text", label: "No response_format"},
		{name: "structured", label: "response_format Findings"},
	},
	table: receiptTable,
}

// parsesAsJSON is json.loads: does the text parse as a JSON document?
func parsesAsJSON(s string) bool {
	var v any
	return json.Unmarshal([]byte(s), &v) == nil
}

// lastWithText is the receipt rule read back from the child's list: its last
// assistant message with non-empty text, trailing white space trimmed.
func lastWithText(list []trace.Message) (trace.Message, bool) {
	for i := len(list) - 1; i >= 0; i-- {
		m := list[i]
		if m.Role == string(delegation.RoleAssistant) && strings.TrimSpace(m.Content) != "" {
			m.Content = strings.TrimRight(m.Content, " \t\r\n")
			return m, true
		}
	}
	return trace.Message{}, false
}

func receiptTable(r runs) (Table, error) {
	text, err := oneChild(r.view("text"), "analyst")
	if err != nil {
		return Table{}, err
	}
	st, err := oneChild(r.view("structured"), "analyst")
	if err != nil {
		return Table{}, err
	}
	// The Findings tool's size, as the model receives its definition: the team
	// is rebuilt from the scenario the run used, with the engine's code.
	sc, err := scenarioOf(st.v.t)
	if err != nil {
		return Table{}, err
	}
	findings, err := findingsSize(sc.Team.SubagentTools("analyst"))
	if err != nil {
		return Table{}, err
	}
	findingsChars := findings.chars
	tab := Table{
		Title:   "What the spec says, and the receipt the parent gets",
		Columns: []string{"the spec says", "the child's tools", "the receipt", "parses as JSON?"},
		Rows: [][]string{
			{"nothing", itoa(len(text.child.Tools)), text.receipt.Content, yesNo(parsesAsJSON(text.receipt.Content))},
			{"response_format=Findings", fmt.Sprintf("%d (+%s, %d characters, %d tokens)", len(st.child.Tools), extraTool(st.child.Tools, text.child.Tools),
				findingsChars, toolTokens(st.child.Tools, "Findings")),
				st.receipt.Content, yesNo(parsesAsJSON(st.receipt.Content))},
		},
	}
	tab.Article = &ArticleTable{
		Columns: tab.Columns,
		Rows: [][]string{
			{"nothing", "7", "子 Agent 的最终报告：结论是 42。", "no"},
			{"response_format=Findings", "8 (+Findings, 285 characters)", `{"findings":"3 条线索","confidence":0.82}`, "yes"},
		},
	}
	tab.Note = "Our analyst's prose report is our own; the structured receipt is the article's, byte for byte."

	// The isolated child's context.
	first, err := text.v.firstCall(text.child.ID)
	if err != nil {
		return Table{}, err
	}
	ctx := text.v.context(first)
	tab.Checks = append(tab.Checks,
		check("the isolated child starts from its own system prompt and the task description, verbatim, and nothing of the parent's",
			len(ctx) == 1 && ctx[0].Content == text.task && first.SystemPrompt == "Look into the question you are given and report what you found." &&
				text.v.occurrences(first, text.v.t.Session.Prompt) == 0,
			"%d message after the system prompt; the parent's question appears %d times", len(ctx), text.v.occurrences(first, text.v.t.Session.Prompt)))

	tab.Checks = append(tab.Checks, receiptRuleChecks(text)...)

	// The structured receipt.
	var call trace.ToolCall
	for _, m := range st.v.list(st.child.ID) {
		for _, tc := range m.ToolCalls {
			if tc.Name == "Findings" {
				call = tc
			}
		}
	}
	var compact bytes.Buffer
	_ = json.Compact(&compact, call.Args)
	var got map[string]any
	_ = json.Unmarshal([]byte(st.receipt.Content), &got)
	_, hasF := got["findings"]
	_, hasC := got["confidence"]
	fin := events[delegation.DelegationFinished](st.v, delegation.EventDelegationFinished)
	var held []string
	if len(fin) > 0 {
		held = fin[0].Data.HeldBack
	}
	tab.Checks = append(tab.Checks,
		check("with a response_format the child gets one more tool, named after the schema's title",
			len(st.child.Tools) == len(text.child.Tools)+1 && extraTool(st.child.Tools, text.child.Tools) == "Findings",
			"%d tools against %d; the extra one: %s", len(st.child.Tools), len(text.child.Tools), extraTool(st.child.Tools, text.child.Tools)),
		check("the structured receipt is the Findings call's arguments as compact JSON, and it parses",
			st.receipt.Content == compact.String() && hasF && hasC, "%s", st.receipt.Content),
		check("the structured response itself is held back: the parent gets only the receipt",
			slices.Contains(held, "structured_response"), "held back: %s", strings.Join(held, ", ")),
	)
	tab.Versus = versusByIndex(tab, "the structured receipt and the article's Findings are the same; the prose report and the Findings tool's size are ours",
		"the child's tools", "the receipt", "parses as JSON?")
	// The tool's characters are counted as the article counts them; what
	// differs is our schema's texts: the article does not print its
	// Findings class, and ours describes the tool and both fields.
	if err := tab.countAs(countedFigure{"response_format=Findings: the child's tools", findings.chars, 285,
		fmt.Sprintf("the article does not print its Findings class; ours describes the tool and both its fields in %d characters, "+
			"and without those descriptions the tool is %d characters", findings.descriptions, findings.bare)}); err != nil {
		return Table{}, err
	}
	return tab, nil
}

// receiptRuleChecks: the receipt is the child's last assistant message
// with text.
func receiptRuleChecks(text *delegationRun) []Check {
	list := text.v.list(text.child.ID)
	last := list[len(list)-1]
	want, _ := lastWithText(list)
	var earlier string
	for _, m := range list {
		if m.Role == string(delegation.RoleAssistant) && m.Content != "" && m.ID != want.ID {
			earlier = m.Content
			break
		}
	}
	return []Check{
		check("the receipt is the child's last assistant message with non-empty text",
			text.receipt.Content == want.Content && want.Content != "", "%q", clip(text.receipt.Content, 60)),
		check("an earlier message with text ('I just wrote a file.') does not count", earlier != "" && !strings.Contains(text.receipt.Content, earlier),
			"earlier: %q", earlier),
		check("an empty last message is walked past", last.Role == string(delegation.RoleAssistant) && last.Content == "" && last.ID != want.ID,
			"the child's last message: %q (%s)", last.Content, last.Role),
		check("a prose receipt does not parse as JSON", !parsesAsJSON(text.receipt.Content), "json.loads fails"),
	}
}

// toolSize is a tool definition's characters, as the model receives it:
// whole, in its descriptions, and without them.
type toolSize struct{ chars, descriptions, bare int }

// findingsSize is the Findings tool's size among a child's tools.
func findingsSize(tools []delegation.ToolDef) (toolSize, error) {
	for _, d := range tools {
		if d.Name == "Findings" {
			whole, _ := json.Marshal(d)
			bare, n, err := withoutDescriptions(d)
			if err != nil {
				return toolSize{}, err
			}
			b, _ := json.Marshal(bare)
			return toolSize{chars: chars(string(whole)), descriptions: n, bare: chars(string(b))}, nil
		}
	}
	return toolSize{}, nil
}

// withoutDescriptions is a tool's definition with no description texts —
// the tool's, and every field's of its schema, however deep — and how many
// characters those were.
func withoutDescriptions(d delegation.ToolDef) (delegation.ToolDef, int, error) {
	n := chars(d.Description)
	d.Description = ""
	var schema map[string]any
	if err := json.Unmarshal(d.Parameters, &schema); err != nil {
		return d, 0, fmt.Errorf("tool %s: its parameters: %w", d.Name, err)
	}
	var strip func(s map[string]any)
	strip = func(s map[string]any) {
		if t, ok := s["description"].(string); ok {
			n += chars(t)
			delete(s, "description")
		}
		if props, ok := s["properties"].(map[string]any); ok {
			for _, p := range props {
				if ps, ok := p.(map[string]any); ok {
					strip(ps)
				}
			}
		}
		if items, ok := s["items"].(map[string]any); ok {
			strip(items)
		}
	}
	strip(schema)
	b, err := json.Marshal(schema)
	if err != nil {
		return d, 0, err
	}
	d.Parameters = b
	return d, n, nil
}

// extraTool names the tools of a that b lacks.
func extraTool(a, b []trace.ToolCost) string {
	var out []string
	for _, t := range a {
		if !hasToolNamed(b, t.Name) {
			out = append(out, t.Name)
		}
	}
	return strings.Join(out, ", ")
}
