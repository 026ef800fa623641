package delegation

import (
	"fmt"
	"math"
	"testing"
	"unicode/utf8"
)

// deepagentsSizes are the sizes, in characters, of deepagents' texts that
// spec/delegation.md asks ours to match within ±5 %: each tool definition as
// JSON (Python json.dumps of the OpenAI tool format), the task tool's
// description with the default list, the fork note, the general-purpose
// prompt and the fork preamble.
var deepagentsSizes = map[string]int{
	"ls": 466, "read_file": 1777, "write_file": 735, "edit_file": 1094, "delete": 636,
	"glob": 1633, "grep": 2301, "task": 1957,
	"task description":             1419,
	"task description, researcher": 1438,
	"task description, override":   1081,
	"fork note":                    86,
	"general-purpose prompt":       286,
	"fork preamble":                567,
}

// ourSizes measures the same texts of ours.
func ourSizes(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	team := mustTeam(t, TeamSpec{})
	for _, d := range team.MainTools() {
		out[d.Name] = utf8.RuneCountInString(ToolJSON(d))
		if d.Name == TaskToolName {
			out["task description"] = utf8.RuneCountInString(d.Description)
		}
	}
	desc := func(ts TeamSpec) int {
		for _, d := range mustTeam(t, ts).MainTools() {
			if d.Name == TaskToolName {
				return utf8.RuneCountInString(d.Description)
			}
		}
		return 0
	}
	// The articles' variants: a researcher line added, and general-purpose
	// replaced by one with an 8-character description.
	out["task description, researcher"] = desc(TeamSpec{Subagents: []Spec{{Name: "researcher", Description: "查资料的"}}})
	out["task description, override"] = desc(TeamSpec{Subagents: []Spec{{Name: GeneralPurposeName, Description: "12345678"}}})
	out["fork note"] = utf8.RuneCountInString(ForkSuffix)
	out["general-purpose prompt"] = utf8.RuneCountInString(GeneralPurpose.SystemPrompt)
	out["fork preamble"] = utf8.RuneCountInString(ForkPreamble)
	return out
}

// TestSizesMatchDeepagents keeps every text of spec/delegation.md's list
// within ±5 % of deepagents' characters.
func TestSizesMatchDeepagents(t *testing.T) {
	ours := ourSizes(t)
	for name, want := range deepagentsSizes {
		got := ours[name]
		off := 100 * float64(got-want) / float64(want)
		t.Logf("%-30s ours %5d  deepagents %5d  %+5.1f%%", name, got, want, off)
		if math.Abs(off) > 5 {
			t.Errorf("%s: %d characters, deepagents' %d: %+.1f%%, outside ±5%%", name, got, want, off)
		}
	}
}

func ExampleToolJSON() {
	fmt.Println(ToolJSON(ToolDef{Name: "x", Description: "Déjà\nvu", Parameters: []byte(`{"type":"object","properties":{"a":{"type":"integer","minimum":0}},"required":["a"]}`)}))
	// Output: {"type": "function", "function": {"name": "x", "description": "D\u00e9j\u00e0\nvu", "parameters": {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0}}, "required": ["a"]}}}
}
