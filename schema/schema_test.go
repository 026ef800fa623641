package schema

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSchemasAreValid(t *testing.T) {
	c := jsonschema.NewCompiler()
	meta, err := c.Compile("https://json-schema.org/draft/2020-12/schema")
	if err != nil {
		t.Fatalf("compiling the 2020-12 metaschema: %v", err)
	}
	for _, s := range []struct {
		id  string
		raw []byte
	}{{ScenarioID, Scenario()}, {TraceID, Trace()}} {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(s.raw))
		if err != nil {
			t.Fatalf("%s: not JSON: %v", s.id, err)
		}
		if err := meta.Validate(doc); err != nil {
			t.Errorf("%s is not a valid 2020-12 schema: %v", s.id, err)
		}
		if got := doc.(map[string]any)["$id"]; got != s.id {
			t.Errorf("$id = %v, want %s", got, s.id)
		}
	}
	// Compiling them as the package does must not panic.
	schemas()
}

func TestRawSchemaIsACopy(t *testing.T) {
	b := Scenario()
	b[0] = 'X'
	if Scenario()[0] == 'X' {
		t.Fatal("Scenario() returned the embedded bytes themselves")
	}
}

func TestValidDocuments(t *testing.T) {
	for _, tc := range []struct {
		name     string
		doc      []byte
		validate func([]byte) []FieldError
	}{
		{"formats.md §1 example scenario", readTestdata(t, "scenario-example.json"), ValidateScenario},
		{"minimal scenario", []byte(`{"name":"x","prompt":"y"}`), ValidateScenario},
		{"response_format a string (the engine reports it)", []byte(`{"name":"x","prompt":"y",
			"subagents":[{"name":"a","description":"d","response_format":"a string"}]}`), ValidateScenario},
		{"mode and skills are the engine's to check", []byte(`{"name":"x","prompt":"y",
			"subagents":[{"name":"a","description":"d","mode":"shared","skills":["s"]},{"name":"a","description":"d","mode":"fork","skills":["s"]}]}`), ValidateScenario},
		{"every turn form", []byte(`{"$schema":"https://delegation.studio/schema/scenario.schema.json","name":"x","prompt":"y","script":{
			"main":[{"content":"a","delay_ms":5},{"tool_calls":[{"name":"ls","args":{"path":"/"},"id":"c1"}]},{"summary":"s","delay_ms":0},
			        {"cases":[{"when":{"context_contains":"a","context_lacks":"b"},"content":"x","delay_ms":1},{"tool_calls":[]}]}],
			"general-purpose":[[{"content":"done"}],[]]}}`), ValidateScenario},
		{"formats.md §2 example trace", readTestdata(t, "trace-example.json"), ValidateTrace},
		{"trace with null lists, as Go writes nil slices", []byte(traceWith(t, func(tr map[string]any) {
			tr["messages"].([]any)[0].(map[string]any)["tool_calls"] = nil
			tr["messages"].([]any)[0].(map[string]any)["tool_call_id"] = ""
			tr["model_calls"].([]any)[0].(map[string]any)["tools"] = nil
			tr["model_calls"].([]any)[0].(map[string]any)["context"] = nil
			tr["messages"].([]any)[1].(map[string]any)["tool_calls"].([]any)[0].(map[string]any)["args"] = nil
		})), ValidateTrace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if errs := tc.validate(tc.doc); errs != nil {
				t.Fatalf("want valid, got %v", errs)
			}
		})
	}
}

// traceWith returns the example trace changed by edit.
func traceWith(t *testing.T, edit func(tr map[string]any)) string {
	t.Helper()
	var tr map[string]any
	if err := json.Unmarshal(readTestdata(t, "trace-example.json"), &tr); err != nil {
		t.Fatal(err)
	}
	edit(tr)
	b, err := json.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestBadDocuments(t *testing.T) {
	const scenario, trace = "scenario", "trace"
	tests := []struct {
		name    string
		kind    string
		doc     string
		field   string
		message string
	}{
		{"missing prompt", scenario, `{"name":"x"}`,
			"prompt", `missing required field "prompt"`},
		{"empty name", scenario, `{"name":"","prompt":"y"}`,
			"name", "must not be empty"},
		{"subagent max_steps 0", scenario, `{"name":"x","prompt":"y","subagents":[{"name":"a","description":"d","max_steps":0}]}`,
			"subagents[0].max_steps", "must be at least 1, not 0"},
		{"typo maxsteps", scenario, `{"name":"x","prompt":"y","subagents":[{"name":"a","description":"d"},{"name":"b","description":"d","maxsteps":3}]}`,
			"subagents[1].maxsteps", `unknown field "maxsteps"; did you mean "max_steps"?`},
		{"subagent without description", scenario, `{"name":"x","prompt":"y","subagents":[{"name":"a"}]}`,
			"subagents[0].description", `missing required field "description"`},
		{"unknown top-level field", scenario, `{"name":"x","prompt":"y","agnet":{}}`,
			"agnet", `unknown field "agnet"; did you mean "agent"?`},
		{"tokenizer gpt2", scenario, `{"name":"x","prompt":"y","tokenizer":"gpt2"}`,
			"tokenizer", `must be one of "o200k_base", "cl100k_base", "approx", not "gpt2"`},
		{"files_merge misspelt", scenario, `{"name":"x","prompt":"y","agent":{"files_merge":"snapshto"}}`,
			"agent.files_merge", `did you mean "snapshot"?`},
		{"files key without a slash", scenario, `{"name":"x","prompt":"y","files":{"README.md":"hello"}}`,
			`files["README.md"]`, `file path "README.md" must be absolute: start it with "/", e.g. "/README.md"`},
		{"file content not a string", scenario, `{"name":"x","prompt":"y","files":{"/a.md":3}}`,
			`files["/a.md"]`, "must be a string, not 3"},
		{"empty turn", scenario, `{"name":"x","prompt":"y","script":{"main":[{}]}}`,
			"script.main[0]", `a turn needs "content" and/or "tool_calls", or "cases", or "summary"`},
		{"turn that is not an object", scenario, `{"name":"x","prompt":"y","script":{"main":[{"content":"a"},"hello"]}}`,
			"script.main[1]", `must be an object, not "hello"`},
		{"turn mixing kinds", scenario, `{"name":"x","prompt":"y","script":{"main":[{"content":"a","summary":"b"}]}}`,
			"script.main[0]", `this one has "content" and "summary"`},
		{"turn with a misspelt field", scenario, `{"name":"x","prompt":"y","script":{"main":[{"content":"a","delay":5}]}}`,
			"script.main[0].delay", `unknown field "delay"; did you mean "delay_ms"?`},
		{"tool call without name", scenario, `{"name":"x","prompt":"y","script":{"main":[{"tool_calls":[{"args":{"path":"/"}}]}]}}`,
			"script.main[0].tool_calls[0].name", `missing required field "name"`},
		{"tool call args not an object", scenario, `{"name":"x","prompt":"y","script":{"helper":[[{"content":"a"}],[{"tool_calls":[{"name":"ls","args":["/"]}]}]]}}`,
			"script.helper[1][0].tool_calls[0].args", "must be an object, not an array"},
		{"case without content", scenario, `{"name":"x","prompt":"y","script":{"main":[{"cases":[{"when":{"context_contains":"a"}}]}]}}`,
			"script.main[0].cases[0]", `a case needs "content" and/or "tool_calls"`},
		{"misspelt when", scenario, `{"name":"x","prompt":"y","script":{"main":[{"cases":[{"when":{"context_contain":"a"},"content":"b"}]}]}}`,
			"script.main[0].cases[0].when.context_contain", `did you mean "context_contains"?`},
		{"negative delay", scenario, `{"name":"x","prompt":"y","script":{"main":[{"summary":"s","delay_ms":-5}]}}`,
			"script.main[0].delay_ms", "must be at least 0, not -5"},
		{"truncated JSON", scenario, "{\n  \"name\": \"x\",\n  \"prompt\": \"y\",\n  \"files\": {",
			"", "the file is not valid JSON: at line 4, column 13"},
		{"bad character", scenario, "{\n  \"name\": \"x\",\n  \"prompt\": y\n}",
			"", "the file is not valid JSON: at line 3, column 13: invalid character 'y'"},
		{"not an object", scenario, `["name"]`,
			"", "the document must be an object, not an array"},
		{"trace version 2", trace, traceWith(t, func(tr map[string]any) { tr["version"] = 2 }),
			"version", "unsupported trace version 2: this studio reads version 1"},
		{"trace missing files", trace, traceWith(t, func(tr map[string]any) { delete(tr, "files") }),
			"files", `missing required field "files"`},
		{"trace event seq 0", trace, traceWith(t, func(tr map[string]any) {
			tr["events"].([]any)[2].(map[string]any)["seq"] = 0
		}), "events[2].seq", "must be at least 1, not 0"},
		{"trace message role system", trace, traceWith(t, func(tr map[string]any) {
			tr["messages"].([]any)[0].(map[string]any)["role"] = "system"
		}), "messages[0].role", `must be one of "user", "assistant", "tool", not "system"`},
		{"trace event time", trace, traceWith(t, func(tr map[string]any) {
			tr["events"].([]any)[0].(map[string]any)["at"] = "yesterday"
		}), "events[0].at", `"yesterday" is not a valid date-time`},
		{"trace agent mode", trace, traceWith(t, func(tr map[string]any) {
			tr["agents"].([]any)[1].(map[string]any)["mode"] = "handoff"
		}), "agents[1].mode", `must be one of null, "isolated", "fork", not "handoff"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			validate := ValidateScenario
			if tc.kind == trace {
				validate = ValidateTrace
			}
			errs := validate([]byte(tc.doc))
			if len(errs) != 1 {
				t.Fatalf("want exactly one error, got %d: %v", len(errs), errs)
			}
			if errs[0].Field != tc.field {
				t.Errorf("Field = %q, want %q (message %q)", errs[0].Field, tc.field, errs[0].Message)
			}
			if !strings.Contains(errs[0].Message, tc.message) {
				t.Errorf("Message = %q, want it to contain %q", errs[0].Message, tc.message)
			}
		})
	}
}

func TestEveryProblemSortedAndUnique(t *testing.T) {
	doc := `{"name":"x","tokenizer":"gpt2","zzz":1,"subagents":[{"name":"a","description":"d","max_steps":0,"maxsteps":1}],
		"script":{"main":[{},{},{"content":1}]}}`
	errs := ValidateScenario([]byte(doc))
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	want := []string{
		`prompt: missing required field "prompt"`,
		`script.main[0]: a turn needs "content" and/or "tool_calls", or "cases", or "summary"`,
		`script.main[1]: a turn needs "content" and/or "tool_calls", or "cases", or "summary"`,
		`script.main[2].content: must be a string, not 1`,
		`subagents[0].max_steps: must be at least 1, not 0`,
		`subagents[0].maxsteps: unknown field "maxsteps"; did you mean "max_steps"?`,
		`tokenizer: must be one of "o200k_base", "cl100k_base", "approx", not "gpt2"`,
		`zzz: unknown field "zzz"; the fields allowed here are "$schema", "agent", "description", "files", "model", "name", "pricing", "prompt", "script", "subagents", "title", "tokenizer"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestIndexesSortNumerically(t *testing.T) {
	turns := make([]string, 12)
	for i := range turns {
		turns[i] = "{}"
	}
	errs := ValidateScenario([]byte(`{"name":"x","prompt":"y","script":{"main":[` + strings.Join(turns, ",") + `]}}`))
	if len(errs) != 12 || errs[2].Field != "script.main[2]" || errs[10].Field != "script.main[10]" {
		t.Fatalf("got %v", errs)
	}
}

func TestFieldErrorError(t *testing.T) {
	if got := (FieldError{Field: "a.b", Message: "bad"}).Error(); got != "a.b: bad" {
		t.Errorf("got %q", got)
	}
	if got := (FieldError{Message: "bad"}).Error(); got != "bad" {
		t.Errorf("got %q", got)
	}
}

func TestConcurrentUse(t *testing.T) {
	example := readTestdata(t, "scenario-example.json")
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs := ValidateScenario(example); errs != nil {
				t.Errorf("example: %v", errs)
			}
			if errs := ValidateScenario([]byte(`{"name":"x","prompt":"y","subagents":[{"name":"a","description":"d","maxsteps":1}]}`)); len(errs) != 1 {
				t.Errorf("typo: %v", errs)
			}
			if errs := ValidateTrace([]byte(`{}`)); len(errs) != 9 {
				t.Errorf("empty trace: want 9 missing fields, got %v", errs)
			}
		}()
	}
	wg.Wait()
}

func TestSuggest(t *testing.T) {
	known := []string{"max_steps", "max_concurrency", "tools", "model", "timeout_ms"}
	for name, want := range map[string]string{
		"maxsteps": "max_steps", "MaxSteps": "max_steps", "tols": "tools", "modle": "model",
		"timeout": "timeout_ms", "xyz": "", "foo": "", "max_stepz": "max_steps",
	} {
		if got := suggest(name, known); got != want {
			t.Errorf("suggest(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestLongValuesAreShortenedInMessages(t *testing.T) {
	long := strings.Repeat("x", 100)
	if got := display(long); got != `"`+strings.Repeat("x", 40)+`…(100 characters)"` {
		t.Fatalf("display = %s", got)
	}
}
