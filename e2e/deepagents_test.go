package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/session"
)

// The differential tests run the same scripted turns through our engine and
// through deepagents (JS, npm deepagents 1.14.1, pinned in e2e/package.json
// and installed by `make test` with npm ci) and compare what every model
// call received: the system prompt, each message's role and text, the tool
// calls, and the names of the tools offered. Texts that are ours by design
// — the general-purpose prompt, the fork preamble, the filesystem tools'
// results — are compared by what they are, not word for word; everything
// else must be equal.

// deepagentsGeneralPurposePrompt is DEFAULT_SUBAGENT_PROMPT of deepagentsjs
// 1.14.1 (src/middleware/subagents.ts); Python's is longer, and ours is
// sized to Python's.
const deepagentsGeneralPurposePrompt = "In order to complete the objective that the user asks of you, you have access to a number of standard tools."

// deepagentsPreamble opens deepagentsjs's FORK_TASK_PREAMBLE, which ends with "]\n\n".
const deepagentsPreamble = "[The messages above are a prior conversation"

type diffMessage struct {
	Role      string `json:"role"`
	Text      string `json:"text"`
	ToolCalls []struct {
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"tool_calls"`
	IsError bool `json:"is_error"`
}

type diffCall struct {
	Agent      string        `json:"agent"`
	Invocation int           `json:"invocation"`
	System     string        `json:"system"`
	Messages   []diffMessage `json:"messages"`
	Tools      []string      `json:"tools"`
}

// transcript is every model call of a run, one agent's calls after
// another, each written out as lines to compare.
type transcript map[string][][]string

func TestDeepagentsDifferential(t *testing.T) {
	if _, err := os.Stat(filepath.Join("node_modules", "deepagents", "package.json")); err != nil {
		t.Fatalf("deepagents is not installed in e2e/node_modules (%v): run `make test`, or `cd e2e && npm ci`", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("the differential tests need Node.js: %v", err)
	}
	paths, err := filepath.Glob(filepath.Join("deepagents", "scenarios", "*.json"))
	if err != nil || len(paths) < 5 {
		t.Fatalf("scenarios: %v (%d found)", err, len(paths))
	}
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".json")
		// One at a time: each runs a Node process, and the browser tests
		// beside them must not starve on a busy machine.
		t.Run(name, func(t *testing.T) {
			doc, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			ours := runOurs(t, doc)
			theirs := runDeepagents(t, node, p)
			compareTranscripts(t, ours, theirs)
		})
	}
}

// recorder keeps every request our engine made.
type recorder struct {
	inner delegation.Model
	mu    sync.Mutex
	calls []diffCall
}

func (r *recorder) Generate(ctx context.Context, req *delegation.Request) (*delegation.Response, error) {
	if req.Purpose == delegation.PurposeTurn {
		c := diffCall{Agent: req.Caller.Name, Invocation: req.Caller.Invocation, System: req.System}
		for _, m := range req.Messages {
			dm := diffMessage{Role: string(m.Role), Text: m.Content, IsError: m.IsError}
			for _, tc := range m.ToolCalls {
				dm.ToolCalls = append(dm.ToolCalls, struct {
					Name string          `json:"name"`
					Args json.RawMessage `json:"args"`
				}{tc.Name, tc.Args})
			}
			c.Messages = append(c.Messages, dm)
		}
		for _, d := range req.Tools {
			c.Tools = append(c.Tools, d.Name)
		}
		r.mu.Lock()
		r.calls = append(r.calls, c)
		r.mu.Unlock()
	}
	return r.inner.Generate(ctx, req)
}

func runOurs(t *testing.T, doc []byte) transcript {
	t.Helper()
	tr, res := runOursResult(t, doc)
	if res.Status != delegation.StatusDone {
		t.Fatalf("our engine: %+v", res)
	}
	return tr
}

// runOursResult runs a scenario through our engine and returns what every
// model call received and how the session ended.
func runOursResult(t *testing.T, doc []byte) (transcript, *delegation.Result) {
	t.Helper()
	sc, err := scenario.Parse(doc)
	if err != nil {
		t.Fatalf("our engine: %v", err)
	}
	inner, err := session.ModelFor(sc)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{inner: inner}
	res, err := session.Run(context.Background(), sc, session.RunOptions{SessionID: "diff", Model: rec})
	if err != nil {
		t.Fatalf("our engine: %v", err)
	}
	return build(rec.calls, ourPlaceholders), res
}

func runDeepagents(t *testing.T, node, path string) transcript {
	t.Helper()
	tr, runErr := runDeepagentsResult(t, node, path)
	if runErr != "" {
		t.Fatalf("deepagents failed: %s", runErr)
	}
	return tr
}

// runDeepagentsResult runs a scenario through deepagents and returns what
// every model call received and, when the run failed, its error.
func runDeepagentsResult(t *testing.T, node, path string) (transcript, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("deepagents", "run.mjs"), path)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("deepagents: %v\n%s", err, errOut.String())
	}
	var got struct {
		Calls []diffCall `json:"calls"`
		Error string     `json:"error"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("deepagents' output: %v\n%s", err, out.String())
	}
	for i := range got.Calls {
		c := &got.Calls[i]
		// deepagents sends the system prompt as the first message, and none
		// when it is empty.
		if len(c.Messages) > 0 && c.Messages[0].Role == "system" {
			c.System, c.Messages = c.Messages[0].Text, c.Messages[1:]
		}
	}
	return build(got.Calls, theirPlaceholders), got.Error
}

// placeholders name the texts that are each engine's own.
type placeholders struct {
	generalPurpose string
	preamble       func(string) (rest string, ok bool)
}

var ourPlaceholders = placeholders{
	generalPurpose: delegation.GeneralPurpose.SystemPrompt,
	preamble: func(s string) (string, bool) {
		return strings.CutPrefix(s, delegation.ForkPreamble)
	},
}

var theirPlaceholders = placeholders{
	generalPurpose: deepagentsGeneralPurposePrompt,
	preamble: func(s string) (string, bool) {
		if !strings.HasPrefix(s, deepagentsPreamble) {
			return s, false
		}
		_, rest, ok := strings.Cut(s, "]\n\n")
		return rest, ok
	},
}

var (
	numbered = regexp.MustCompile(`(?m)^\s*\d+\t`)
	// pageTitle is deepagents' read_file status header ("@@ lines 1-52 of
	// 100 | next offset 52 | truncated due to size @@"), under its
	// truncation notice when it cut the read; pageNotes are our read_file's
	// notes of the same (where to read on, how much of a cut line shows).
	pageTitle = regexp.MustCompile(`(?m)^@@ lines [^\n]*@@\n`)
	pageNotes = regexp.MustCompile(`(\n\(line \d+ is cut: \d+ of its \d+ characters are shown\))?(\n\(\d+ more lines; read on with offset \d+\))?$`)
	// evictedTo is the file a human message over 200,000 characters went
	// to: deepagents names it with 12 random hex digits.
	evictedTo = regexp.MustCompile(`/conversation_history/[0-9a-f]{12}`)
)

// build writes each call as lines, grouped by agent and invocation.
func build(calls []diffCall, ph placeholders) transcript {
	out := transcript{}
	for _, c := range calls {
		key := fmt.Sprintf("%s#%d", c.Agent, c.Invocation)
		lines := []string{"tools: " + strings.Join(c.Tools, ", ")}
		sys := c.System
		if sys == ph.generalPurpose {
			sys = "<the general-purpose prompt>"
		}
		lines = append(lines, "system: "+sys)
		// Which tool each result answers, by position.
		var pending []string
		for _, m := range c.Messages {
			switch m.Role {
			case "assistant":
				line := "assistant: " + m.Text
				pending = pending[:0]
				for _, tc := range m.ToolCalls {
					line += " → " + tc.Name + " " + canonical(tc.Args)
					pending = append(pending, tc.Name)
				}
				lines = append(lines, line)
			case "tool":
				tool := ""
				if len(pending) > 0 {
					tool, pending = pending[0], pending[1:]
				}
				lines = append(lines, "tool: "+result(tool, m))
			default:
				text := evictedTo.ReplaceAllString(m.Text, "/conversation_history/<id>")
				if rest, ok := ph.preamble(text); ok {
					text = "<the fork preamble>" + rest
				}
				lines = append(lines, m.Role+": "+text)
			}
		}
		out[key] = append(out[key], lines)
	}
	return out
}

// result is a tool result as compared: a filesystem tool's by what it did
// (its texts are each engine's own), read_file's by the file's lines, the
// task tool's (receipts, refusals) word for word.
func result(tool string, m diffMessage) string {
	failed := m.IsError || strings.HasPrefix(m.Text, "Error")
	switch tool {
	case "task", "":
		return m.Text
	case "read_file":
		if failed {
			return "<read_file failed>"
		}
		text := m.Text
		if loc := pageTitle.FindStringIndex(text); loc != nil {
			text = text[:loc[0]] + text[loc[1]:]
		}
		text = pageNotes.ReplaceAllString(text, "")
		return "<read_file> " + numbered.ReplaceAllString(text, "")
	}
	if failed {
		return "<" + tool + " failed>"
	}
	return "<" + tool + " ok>"
}

func canonical(args json.RawMessage) string {
	var v any
	if json.Unmarshal(args, &v) != nil {
		return string(args)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func compareTranscripts(t *testing.T, ours, theirs transcript) {
	t.Helper()
	keys := map[string]bool{}
	for k := range ours {
		keys[k] = true
	}
	for k := range theirs {
		keys[k] = true
	}
	var sorted []string
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		o, th := ours[k], theirs[k]
		if len(o) != len(th) {
			t.Errorf("%s: %d model calls here, %d in deepagents", k, len(o), len(th))
			continue
		}
		for i := range o {
			if a, b := strings.Join(o[i], "\n"), strings.Join(th[i], "\n"); a != b {
				t.Errorf("%s, call %d differs:\n--- ours\n%s\n--- deepagents\n%s", k, i+1, a, b)
			}
		}
	}
	if t.Failed() {
		return
	}
	var n int
	for _, calls := range ours {
		n += len(calls)
	}
	t.Logf("%d agents, %d model calls, the same in both engines", len(ours), n)
}

// TestDeepagentsDifferentialBig runs the cases of big texts (delegation.md
// §12), written here rather than kept as files for their size: a read_file
// deepagents cuts at whole lines and one it cuts inside a line; a child's
// receipt over 80,000 characters, which becomes a file and a pointer; a
// prompt of 250,000 characters, which does too, and which a fork inherits
// as the pointer.
func TestDeepagentsDifferentialBig(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("the differential tests need Node.js: %v", err)
	}
	var lines strings.Builder
	for i := range 100 {
		fmt.Fprintf(&lines, "%04d %s\n", i+1, strings.Repeat("x", 1505))
	}
	prompt := strings.Repeat("Here is a line of the pasted log.\n", 7353) + "What went wrong?"
	cases := map[string]map[string]any{
		"big-read": {
			"prompt": "Read both files.",
			"files":  map[string]string{"/big.txt": lines.String(), "/one.json": strings.Repeat("y", 151089)},
			"script": map[string]any{"main": []any{
				map[string]any{"content": "Reading.", "tool_calls": []any{
					map[string]any{"id": "r1", "name": "read_file", "args": map[string]any{"file_path": "/big.txt"}},
					map[string]any{"id": "r2", "name": "read_file", "args": map[string]any{"file_path": "/one.json"}},
				}},
				map[string]any{"content": "Read on.", "tool_calls": []any{
					map[string]any{"id": "r3", "name": "read_file", "args": map[string]any{"file_path": "/big.txt", "offset": 52}},
				}},
				map[string]any{"content": "Both are long."},
			}},
		},
		"big-receipt": {
			"prompt":    "Ask the researcher for everything.",
			"subagents": []any{map[string]any{"name": "researcher", "description": "Finds things.", "system_prompt": "Report everything."}},
			"script": map[string]any{
				"main": []any{
					map[string]any{"content": "Asking.", "tool_calls": []any{
						map[string]any{"id": "call_everything", "name": "task", "args": map[string]any{"description": "Report everything.", "subagent_type": "researcher"}},
					}},
					map[string]any{"content": "Reading the report.", "tool_calls": []any{
						map[string]any{"id": "r1", "name": "read_file", "args": map[string]any{"file_path": "/large_tool_results/call_everything.txt", "limit": 3}},
					}},
					map[string]any{"content": "It is long."},
				},
				"researcher": []any{[]any{map[string]any{"content": strings.Repeat("Finding: the cache was cold.\n", 3000) + "That is all."}}},
			},
		},
		"big-prompt": {
			"prompt":    prompt,
			"subagents": []any{map[string]any{"name": "forked", "description": "Sees everything.", "system_prompt": "Look closely.", "mode": "fork"}},
			"script": map[string]any{
				"main": []any{
					map[string]any{"content": "Forking.", "tool_calls": []any{
						map[string]any{"id": "f1", "name": "task", "args": map[string]any{"description": "Find the error in the log.", "subagent_type": "forked"}},
					}},
					map[string]any{"content": "The log is long."},
				},
				"forked": []any{[]any{map[string]any{"content": "The log repeats one line."}}},
			},
		},
	}
	dir := t.TempDir()
	for name, c := range cases {
		c["name"] = name
		t.Run(name, func(t *testing.T) {
			doc, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, name+".json")
			if err := os.WriteFile(p, doc, 0o644); err != nil {
				t.Fatal(err)
			}
			ours, theirs := runOurs(t, doc), runDeepagents(t, node, p)
			compareTranscripts(t, ours, theirs)
		})
	}
}

// TestDeepagentsDifferentialRules runs the cases of issue 29's smaller
// differences, each one rule of docs/delegation.md, through both engines.
// A case that fails must fail in both, after the same model calls.
// ruleCase is a scenario of docs/delegation.md's rules run by both
// engines, and whether both runs fail.
type ruleCase struct {
	doc   map[string]any
	fails bool
}

// ruleCases are TestDeepagentsDifferentialRules' scenarios, by name.
func ruleCases() map[string]ruleCase {
	ls := map[string]any{"name": "ls", "args": map[string]any{"path": "/"}}
	var busy []any
	for range 6 {
		busy = append(busy, map[string]any{"content": "Looking.", "tool_calls": []any{ls}})
	}
	busy = append(busy, map[string]any{"content": "Found it."})
	researcher := []any{map[string]any{"name": "researcher", "description": "Finds things.", "system_prompt": "Find it."}}
	cases := map[string]ruleCase{
		// §2: max_steps 3 reaches the child, which makes 3 calls and fails
		// the run (compat: deepagents' GraphRecursionError fails it).
		"max-steps": {fails: true, doc: map[string]any{
			"prompt":    "Find the file.",
			"agent":     map[string]any{"max_steps": 3, "compat": "deepagents"},
			"subagents": researcher,
			"script": map[string]any{
				"main":       []any{map[string]any{"content": "Asking.", "tool_calls": []any{map[string]any{"name": "task", "args": map[string]any{"description": "Find the file.", "subagent_type": "researcher"}}}}},
				"researcher": []any{busy},
			},
		}},
	}
	// §4: under compat a spec's tools add to the filesystem tools.
	cases["tools-add"] = ruleCase{doc: map[string]any{
		"prompt":    "What does the note say?",
		"agent":     map[string]any{"compat": "deepagents"},
		"files":     map[string]string{"/note.md": "Ship on Friday.\n"},
		"subagents": []any{map[string]any{"name": "reader", "description": "Reads files.", "system_prompt": "Read it.", "tools": []string{"read_file"}}},
		"script": map[string]any{
			"main": []any{
				map[string]any{"content": "Asking.", "tool_calls": []any{map[string]any{"name": "task", "args": map[string]any{"description": "Read /note.md.", "subagent_type": "reader"}}}},
				map[string]any{"content": "It says ship on Friday."},
			},
			"reader": []any{[]any{
				map[string]any{"content": "Looking.", "tool_calls": []any{ls}},
				map[string]any{"content": "It says: ship on Friday."},
			}},
		},
	}}
	// §10: a structured child that answers in plain text ends, and its
	// text is the receipt; §5: one that calls its tool sends compact JSON.
	findings := map[string]any{"title": "Findings", "type": "object",
		"properties": map[string]any{"findings": map[string]any{"type": "string"}, "confidence": map[string]any{"type": "number"}},
		"required":   []string{"findings"}}
	cases["structured"] = ruleCase{doc: map[string]any{
		"prompt": "Analyse twice.",
		"subagents": []any{map[string]any{"name": "analyst", "description": "Analyses.", "system_prompt": "Analyse.",
			"response_format": findings}},
		"script": map[string]any{
			"main": []any{
				map[string]any{"content": "Asking.", "tool_calls": []any{
					map[string]any{"name": "task", "args": map[string]any{"description": "Analyse the plain way.", "subagent_type": "analyst"}},
					map[string]any{"name": "task", "args": map[string]any{"description": "Analyse the structured way.", "subagent_type": "analyst"}},
				}},
				map[string]any{"content": "Done."},
			},
			"analyst": []any{
				[]any{map[string]any{"content": "Three leads, all weak."}},
				[]any{map[string]any{"content": "", "tool_calls": []any{map[string]any{"name": "Findings",
					"args": map[string]any{"findings": "Drei Spuren — «schwach»", "confidence": 0.5}}}}},
			},
		},
	}}
	// §3: under compat an empty description starts a child with an empty
	// message.
	cases["empty-description"] = ruleCase{doc: map[string]any{
		"prompt":    "Ask for nothing.",
		"agent":     map[string]any{"compat": "deepagents"},
		"subagents": researcher,
		"script": map[string]any{
			"main": []any{
				map[string]any{"content": "Asking.", "tool_calls": []any{map[string]any{"name": "task", "args": map[string]any{"description": "", "subagent_type": "researcher"}}}},
				map[string]any{"content": "It had nothing to do."},
			},
			"researcher": []any{[]any{map[string]any{"content": "There is no task."}}},
		},
	}}
	return cases
}

func TestDeepagentsDifferentialRules(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("the differential tests need Node.js: %v", err)
	}
	cases := ruleCases()
	dir := t.TempDir()
	for name, c := range cases {
		c.doc["name"] = name
		t.Run(name, func(t *testing.T) {
			doc, err := json.Marshal(c.doc)
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, name+".json")
			if err := os.WriteFile(p, doc, 0o644); err != nil {
				t.Fatal(err)
			}
			ours, res := runOursResult(t, doc)
			theirs, theirErr := runDeepagentsResult(t, node, p)
			if failed := res.Status != delegation.StatusDone; failed != c.fails || (theirErr != "") != c.fails {
				t.Fatalf("failed here: %v (%v); in deepagents: %q; want failed %v", failed, res.Err, theirErr, c.fails)
			}
			compareTranscripts(t, ours, theirs)
		})
	}
}
