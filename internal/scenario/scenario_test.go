package scenario

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/delegationstudio/studio/internal/delegation"
)

func parseErrors(t *testing.T, doc string) delegation.FieldErrors {
	t.Helper()
	_, err := Parse([]byte(doc))
	var fe delegation.FieldErrors
	if !errors.As(err, &fe) {
		t.Fatalf("Parse error = %v, want FieldErrors", err)
	}
	return fe
}

func TestParse(t *testing.T) {
	t.Run("the example of formats.md runs as written", func(t *testing.T) {
		doc, err := os.ReadFile("../../examples/order-number.json")
		if err != nil {
			t.Fatal(err)
		}
		sc, err := Parse(doc)
		if err != nil {
			t.Fatalf("Parse: %v", err)
		}
		if got, want := sc.Team.Names(), []string{"general-purpose", "reporter"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("subagents = %v, want %v", got, want)
		}
		if sc.Tokenizer() != "o200k_base" || sc.Provider != ProviderScripted || sc.Script == nil {
			t.Fatalf("tokenizer %s, provider %s", sc.Tokenizer(), sc.Provider)
		}
		if len(sc.Warnings) != 0 {
			t.Fatalf("warnings = %v", sc.Warnings)
		}
		// The fork lists its own tools: it runs with them and task.
		var tools []string
		for _, d := range sc.Team.SubagentTools("reporter") {
			tools = append(tools, d.Name)
		}
		if !reflect.DeepEqual(tools, []string{"read_file", "task"}) {
			t.Fatalf("the reporter's tools = %v", tools)
		}
		if sc.Team.Main.Compat != delegation.CompatNone || sc.Team.Main.Summarization.MaxTokens != 170000 || sc.Team.Main.MaxSteps != 4999 {
			t.Fatalf("team = %+v", sc.Team.Main)
		}
	})
	t.Run("compat and a subagent's own summarization reach the engine", func(t *testing.T) {
		sc, err := Parse([]byte(`{"name":"x","prompt":"y","agent":{"compat":"deepagents"},
			"subagents":[{"name":"a","description":"d","summarization":{"max_tokens":900,"keep_messages":2}}],
			"script":{"main":[{"content":"done"}]}}`))
		if err != nil {
			t.Fatal(err)
		}
		if sc.Team.Main.Compat != delegation.CompatDeepagents || sc.Team.Main.FilesMerge != delegation.MergeSnapshot {
			t.Fatalf("main = %+v", sc.Team.Main)
		}
		if got := sc.Team.Subagent("a").Summarization; got != (delegation.Summarization{MaxTokens: 900, KeepMessages: 2}) {
			t.Fatalf("a's summarization = %+v", got)
		}
	})
	t.Run("WithCompat runs a scenario as deepagents does, dropping the settings compat switches", func(t *testing.T) {
		sc, err := Parse([]byte(`{"name":"x","prompt":"y","agent":{"files_merge":"delta","max_concurrency":2},"script":{"main":[{"content":"done"}]}}`))
		if err != nil {
			t.Fatal(err)
		}
		da, err := WithCompat(sc, delegation.CompatDeepagents)
		if err != nil {
			t.Fatal(err)
		}
		if da.Team.Main.Compat != delegation.CompatDeepagents || da.Team.Main.FilesMerge != delegation.MergeSnapshot || !strings.Contains(string(da.Raw), `"compat":"deepagents"`) {
			t.Fatalf("team %+v, raw %s", da.Team.Main, da.Raw)
		}
		ours, err := WithCompat(da, delegation.CompatNone)
		if err != nil || ours.Team.Main.Compat != delegation.CompatNone || ours.Team.Main.FilesMerge != delegation.MergeDelta {
			t.Fatalf("back to ours: %v %+v", err, ours)
		}
	})
	t.Run("compat says what it accepts", func(t *testing.T) {
		fe := parseErrors(t, `{"name":"x","prompt":"y","agent":{"compat":"langchain"},"script":{"main":[{"content":"done"}]}}`)
		if len(fe) == 0 || fe[0].Field != "agent.compat" {
			t.Fatalf("errors = %v", fe)
		}
	})
	t.Run("only name and prompt are required, with a script for the scripted model", func(t *testing.T) {
		sc, err := Parse([]byte(`{"name":"x","prompt":"y","script":{"main":[{"content":"done"}]}}`))
		if err != nil {
			t.Fatal(err)
		}
		if sc.Tokenizer() != "o200k_base" || sc.Team.Main.MaxSteps != delegation.DefaultMaxSteps || sc.Team.Main.FilesMerge != delegation.MergeDelta {
			t.Fatalf("defaults: %s %d %s", sc.Tokenizer(), sc.Team.Main.MaxSteps, sc.Team.Main.FilesMerge)
		}
	})
	t.Run("schema problems come first, each at its field", func(t *testing.T) {
		fe := parseErrors(t, `{"name":"x","subagents":[{"name":"a","description":"d","maxsteps":3}]}`)
		fields := []string{}
		for _, e := range fe {
			fields = append(fields, e.Field)
		}
		if !reflect.DeepEqual(fields, []string{"prompt", "subagents[0].maxsteps"}) {
			t.Fatalf("errors = %v", fe)
		}
		if !strings.Contains(fe[1].Message, `did you mean "max_steps"`) {
			t.Fatalf("message = %q", fe[1].Message)
		}
	})
	t.Run("rule and script problems are reported together", func(t *testing.T) {
		fe := parseErrors(t, `{"name":"x","prompt":"y",
			"subagents":[{"name":"a","description":"d","mode":"shared"},{"name":"a","description":"d"}],
			"files":{"/a/../b":"z"},
			"script":{"main":[{"tool_calls":[{"name":"ls","args":"/"}]}]}}`)
		got := fe.Error()
		for _, want := range []string{
			"subagents[0].mode: SubAgent 'a' has invalid mode 'shared'; expected 'isolated' or 'fork'",
			"subagents[1].name: Duplicate subagent name 'a'; each subagent must have a unique name.",
			`files["/a/../b"]: Path '/a/../b' is not allowed`,
			"script.main[0].tool_calls[0].args:",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("errors lack %q:\n%s", want, got)
			}
		}
	})
	t.Run("a scripted scenario without a script says how to add one", func(t *testing.T) {
		fe := parseErrors(t, `{"name":"x","prompt":"y"}`)
		if len(fe) != 1 || fe[0].Field != "script" || !strings.Contains(fe[0].Message, `"script": {"main"`) {
			t.Fatalf("errors = %v", fe)
		}
	})
	t.Run("a script key that names no agent is a warning", func(t *testing.T) {
		sc, err := Parse([]byte(`{"name":"x","prompt":"y","script":{"main":[{"content":"ok"}],"researcher":[[{"content":"r"}]]}}`))
		if err != nil {
			t.Fatal(err)
		}
		if len(sc.Warnings) != 1 || sc.Warnings[0].Field != "script.researcher" {
			t.Fatalf("warnings = %v", sc.Warnings)
		}
	})
	t.Run("an openai scenario needs a model name", func(t *testing.T) {
		fe := parseErrors(t, `{"name":"x","prompt":"y","model":{"provider":"openai"}}`)
		if len(fe) != 1 || fe[0].Field != "model.model" {
			t.Fatalf("errors = %v", fe)
		}
	})
	t.Run("the scenario is kept exactly as given", func(t *testing.T) {
		sc, err := Parse([]byte("{\"name\": \"x\",\n \"prompt\": \"y\", \"script\": {\"main\": [{\"content\": \"ok\"}]}}"))
		if err != nil {
			t.Fatal(err)
		}
		if got := string(sc.Raw); got != `{"name":"x","prompt":"y","script":{"main":[{"content":"ok"}]}}` {
			t.Fatalf("raw = %s", got)
		}
	})
}

// Issue 28: a validation error quoted a 100 KB path whole, in its field and
// its message. Each quotes at most a few hundred characters and says the
// full length.
func TestLongPathsAreQuotedShort(t *testing.T) {
	long := "/" + strings.Repeat("a", 102399)
	for name, doc := range map[string]string{
		"absolute":     `{"name": "x", "prompt": "p", "script": {"main": [{"content": "a"}]}, "files": {"` + long + `": "x"}}`,
		"not absolute": `{"name": "x", "prompt": "p", "script": {"main": [{"content": "a"}]}, "files": {"` + long[1:] + "b" + `": "x"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(doc))
			var fe delegation.FieldErrors
			if !errors.As(err, &fe) || len(fe) == 0 {
				t.Fatalf("want field errors, got %v", err)
			}
			for _, f := range fe {
				if len(f.Field) > 300 || len(f.Message) > 600 {
					t.Errorf("field of %d bytes, message of %d: %.200s", len(f.Field), len(f.Message), f.Field)
				}
				if !strings.Contains(f.Field, "…(102,400 characters)") {
					t.Errorf("the field does not say the length: %s", f.Field)
				}
			}
		})
	}
}

// A scripted scenario without a script says so with a code, which the team
// editor filters on (a team need not be runnable to be kept).
func TestNoScriptCode(t *testing.T) {
	for _, doc := range []string{`{"name":"x","prompt":"y"}`} {
		var codes []string
		for _, e := range parseErrors(t, doc) {
			if e.Code != "" {
				codes = append(codes, e.Field+" "+e.Code)
			}
		}
		if !reflect.DeepEqual(codes, []string{"script " + ENoScript}) {
			t.Errorf("%s: codes %v", doc, codes)
		}
	}
}
