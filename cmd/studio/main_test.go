package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegationstudio/studio/schema"
)

func studio(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "scenario.json")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const example = "../../examples/order-number.json"

func TestRun(t *testing.T) {
	t.Run("prints the delegation tree and exits 0", func(t *testing.T) {
		code, out, _ := studio(t, "run", example)
		if code != exitOK {
			t.Fatalf("exit %d", code)
		}
		for _, want := range []string{"session order-number: done", "main  done  3 steps", "└─ reporter [fork]  done  1 step", `receipt: "A-7731"`, "answer: The helper says A-7731.", "files: /README.md, /order.md"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("prints what each agent's calls had cached and, with a price, what they cost", func(t *testing.T) {
		doc, _ := os.ReadFile(example)
		var m map[string]any
		_ = json.Unmarshal(doc, &m)
		m["pricing"] = map[string]any{"input": 2.5, "cached_input": 1.25, "output": 10}
		doc, _ = json.Marshal(m)
		code, out, _ := studio(t, "run", writeFile(t, string(doc)))
		if code != exitOK {
			t.Fatalf("exit %d", code)
		}
		for _, want := range []string{"5,219 cached · $0.0", "main  done  3 steps  7,863 tokens in, 5,219 cached", "entry 1,080 (39 inherited, 0 cached)  $0.00",
			"economics: the receipt kept 0 tokens of the child's work out of 1 later call of the parent (0 tokens); the child cost $0.00"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("--json prints a trace that validates against the published schema", func(t *testing.T) {
		code, out, _ := studio(t, "run", example, "--json")
		if code != exitOK {
			t.Fatalf("exit %d", code)
		}
		if errs := schema.ValidateTrace([]byte(out)); len(errs) > 0 {
			t.Fatalf("trace invalid: %v", errs)
		}
		var tr struct {
			Session struct{ Status string }
			Agents  []struct{ Name string }
		}
		if err := json.Unmarshal([]byte(out), &tr); err != nil || tr.Session.Status != "done" || len(tr.Agents) != 2 {
			t.Fatalf("trace = %+v, %v", tr, err)
		}
	})
	t.Run("a bad scenario exits 2 with one error per line, each naming its field", func(t *testing.T) {
		p := writeFile(t, `{"name":"x","prompt":"y","subagents":[{"name":"a","description":"d","mode":"shared"},{"name":"a","description":"d","mode":"fork","skills":["s"]}],"script":{"main":[{"content":"ok"}]}}`)
		code, out, errOut := studio(t, "run", p)
		if code != exitUsage || out != "" {
			t.Fatalf("exit %d, stdout %q", code, out)
		}
		lines := strings.Split(strings.TrimSpace(errOut), "\n")
		want := []string{
			p + ": subagents[0].mode: SubAgent 'a' has invalid mode 'shared'; expected 'isolated' or 'fork'",
			p + ": subagents[1].name: Duplicate subagent name 'a'; each subagent must have a unique name.",
			p + ": subagents[1].skills: SubAgent 'a' cannot set skills under mode='fork'; the parent's skills are inherited instead.",
		}
		if strings.Join(lines, "\n") != strings.Join(want, "\n") {
			t.Fatalf("stderr =\n%s\nwant\n%s", errOut, strings.Join(want, "\n"))
		}
	})
	t.Run("a session that fails exits 1 and says why", func(t *testing.T) {
		p := writeFile(t, `{"name":"x","prompt":"y","script":{"main":[{"tool_calls":[{"name":"ls","args":{"path":"/"}}]}]}}`)
		code, out, errOut := studio(t, "run", p)
		if code != exitFailed {
			t.Fatalf("exit %d", code)
		}
		if !strings.Contains(out, "main  failed") || !strings.Contains(errOut, "script.main ran out") {
			t.Fatalf("stdout:\n%s\nstderr:\n%s", out, errOut)
		}
	})
	t.Run("a missing file exits 2", func(t *testing.T) {
		if code, _, errOut := studio(t, "run", "/nope.json"); code != exitUsage || !strings.Contains(errOut, "no such file") {
			t.Fatalf("exit %d: %s", code, errOut)
		}
	})
}

func TestValidate(t *testing.T) {
	code, out, errOut := studio(t, "validate", example)
	if code != exitOK || !strings.Contains(out, "valid: 2 subagents (general-purpose, reporter)") {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	if errOut != "" {
		t.Fatalf("stderr = %q, want no warning: a fork's own tools are used", errOut)
	}
	p := writeFile(t, `{"name":"x"`)
	if code, _, errOut := studio(t, "validate", p); code != exitUsage || !strings.Contains(errOut, "not valid JSON") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

func TestUsage(t *testing.T) {
	if code, _, errOut := studio(t, "frobnicate"); code != exitUsage || !strings.Contains(errOut, `unknown command "frobnicate"`) {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if code, out, _ := studio(t, "--help"); code != exitOK || !strings.Contains(out, "studio run SCENARIO.json") {
		t.Fatalf("exit %d: %s", code, out)
	}
	if code, _, errOut := studio(t, "run"); code != exitUsage || !strings.Contains(errOut, "studio run: give a scenario file, or lesson:NAME") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

func TestStoreCommands(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "studio.db")
	code, out, errOut := studio(t, "run", example, "--json", "--db", dbPath)
	if code != exitOK {
		t.Fatalf("run --db: exit %d: %s", code, errOut)
	}
	var tr struct {
		Session struct{ ID, Status string }
	}
	if err := json.Unmarshal([]byte(out), &tr); err != nil || tr.Session.ID == "" {
		t.Fatalf("trace: %v %s", err, out)
	}
	id := tr.Session.ID

	t.Run("sessions lists the stored session", func(t *testing.T) {
		code, out, _ := studio(t, "sessions", "--db", dbPath)
		if code != exitOK || !strings.Contains(out, id) || !strings.Contains(out, "done") || !strings.Contains(out, "order-number") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
	})
	t.Run("STUDIO_DB is the default database", func(t *testing.T) {
		t.Setenv("STUDIO_DB", dbPath)
		if code, out, _ := studio(t, "sessions"); code != exitOK || !strings.Contains(out, id) {
			t.Fatalf("exit %d:\n%s", code, out)
		}
	})
	var exported string
	t.Run("export prints the trace with the stored id", func(t *testing.T) {
		code, out, errOut := studio(t, "export", id, "--db", dbPath)
		if code != exitOK || !strings.Contains(out, `"id":"`+id+`"`) || strings.Count(out, "\n") != 1 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		if errs := schema.ValidateTrace([]byte(out)); len(errs) > 0 {
			t.Fatalf("invalid trace: %v", errs)
		}
		exported = out
	})
	t.Run("export --format otlp prints OTLP JSON", func(t *testing.T) {
		code, out, errOut := studio(t, "export", id, "--format", "otlp", "--db", dbPath)
		var doc struct {
			ResourceSpans []json.RawMessage `json:"resourceSpans"`
		}
		if code != exitOK || json.Unmarshal([]byte(out), &doc) != nil || len(doc.ResourceSpans) != 1 {
			t.Fatalf("exit %d: %s %s", code, errOut, out)
		}
	})
	t.Run("import stores an export under a new id", func(t *testing.T) {
		p := writeFile(t, exported)
		code, out, errOut := studio(t, "import", p, "--db", dbPath)
		newID := strings.TrimSpace(out)
		if code != exitOK || newID == "" || newID == id {
			t.Fatalf("exit %d: %q %s", code, out, errOut)
		}
		if code, _, _ := studio(t, "export", newID, "--db", dbPath); code != exitOK {
			t.Fatalf("export of the import: exit %d", code)
		}
	})
	t.Run("a bad import exits 2, one error per line, and writes nothing", func(t *testing.T) {
		p := writeFile(t, strings.Replace(exported, `"version":1`, `"version":7`, 1))
		code, _, errOut := studio(t, "import", p, "--db", dbPath)
		if code != exitUsage || !strings.Contains(errOut, p+": version: unsupported trace version 7") {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		_, out, _ := studio(t, "sessions", "--db", dbPath)
		if n := strings.Count(out, "order-number"); n != 2 {
			t.Fatalf("%d sessions listed, want 2:\n%s", n, out)
		}
	})
	t.Run("exporting an unknown session exits 2", func(t *testing.T) {
		if code, _, errOut := studio(t, "export", "nope", "--db", dbPath); code != exitUsage || !strings.Contains(errOut, `no session "nope"`) {
			t.Fatalf("exit %d: %s", code, errOut)
		}
	})
}

func TestLessons(t *testing.T) {
	code, out, _ := studio(t, "lessons")
	if code != exitOK || !strings.Contains(out, "order-number") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	code, out, errOut := studio(t, "run", "lesson:one-delegation")
	if code != exitOK || !strings.Contains(out, "general-purpose [isolated]  done") || !strings.Contains(out, `receipt: "`) {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	if code, _, errOut := studio(t, "run", "lesson:nope"); code != exitUsage || !strings.Contains(errOut, `no lesson "nope"`) {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

// The command line stays English, but --lang zh lists the lessons' Chinese
// titles, as the pages show them; the names and the rest stay as they are.
func TestLessonsInChinese(t *testing.T) {
	_, en, _ := studio(t, "lessons")
	code, zh, errOut := studio(t, "lessons", "--lang", "zh")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(zh, "one-delegation           一次委派：每次模型调用收到了什么") || strings.Contains(zh, "One delegation: what each model call received") {
		t.Errorf("--lang zh:\n%s", zh)
	}
	if !strings.Contains(en, "One delegation: what each model call received") {
		t.Errorf("without --lang:\n%s", en)
	}
	if strings.Count(zh, "\n") != strings.Count(en, "\n") || !strings.Contains(zh, "variants: entry-cost--1-step") {
		t.Errorf("--lang zh lists other lines than English does:\n%s", zh)
	}
	if code, _, errOut := studio(t, "lessons", "--lang", "fr"); code != exitUsage || !strings.Contains(errOut, "use en or zh") {
		t.Errorf("--lang fr: exit %d, %s", code, errOut)
	}
}

// fakeOpenAI answers chat completions like a model that delegates once: the
// parent calls task, the child answers, the parent relays the answer.
func fakeOpenAI(t *testing.T) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Stream   bool `json:"stream"`
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
			Tools []struct {
				Function struct{ Name string } `json:"function"`
			} `json:"tools"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		hasTask := false
		for _, tl := range req.Tools {
			hasTask = hasTask || tl.Function.Name == "task"
		}
		last := req.Messages[len(req.Messages)-1]
		msg := map[string]any{"role": "assistant", "content": "the child's answer is 42"}
		switch {
		case hasTask && last.Role == "user":
			msg = map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{
				"id": "call_1", "type": "function", "function": map[string]any{"name": "task",
					"arguments": `{"description": "compute 6*7", "subagent_type": "general-purpose"}`}}}}
		case hasTask:
			msg = map[string]any{"role": "assistant", "content": "The helper says: " + last.Content}
		}
		if req.Stream {
			// One chunk with the whole answer, as the SSE wire format has it.
			delta := map[string]any{"role": "assistant", "content": msg["content"]}
			if tc, ok := msg["tool_calls"].([]any); ok {
				call := tc[0].(map[string]any)
				call["index"] = 0
				delta["tool_calls"] = []any{call}
			}
			w.Header().Set("Content-Type", "text/event-stream")
			chunk, _ := json.Marshal(map[string]any{"id": "x", "object": "chat.completion.chunk", "model": "m",
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": "stop"}}})
			fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", chunk)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "x", "object": "chat.completion", "model": "m",
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": "stop"}},
			"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
	}))
}

func TestRunAgainstAnEndpoint(t *testing.T) {
	srv := fakeOpenAI(t)
	defer srv.Close()
	t.Setenv("OPENAI_API_KEY", "sk-test-never-printed")
	code, out, errOut := studio(t, "run", "lesson:one-delegation", "--model-url", srv.URL+"/v1", "--model", "test-model")
	if code != exitOK {
		t.Fatalf("exit %d:\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, `receipt: "the child's answer is 42"`) || !strings.Contains(out, "answer: The helper says: the child's answer is 42") {
		t.Fatalf("output:\n%s", out)
	}
	if strings.Contains(out+errOut, "sk-test-never-printed") {
		t.Fatal("the API key was printed")
	}
	if code, _, errOut := studio(t, "run", "lesson:one-delegation", "--model-url", srv.URL); code != exitUsage || !strings.Contains(errOut, "--model NAME") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

func TestServeRefusesToListenBeyondLoopbackWithoutAToken(t *testing.T) {
	t.Setenv("STUDIO_TOKEN", "")
	code, _, errOut := studio(t, "serve", "--addr", "0.0.0.0:0", "--db", filepath.Join(t.TempDir(), "s.db"))
	if code != exitUsage || !strings.Contains(errOut, "set an access token with STUDIO_TOKEN or --token-file") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}
