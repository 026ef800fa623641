package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/delegationstudio/studio/internal/delegation"
)

func mustParse(t testing.TB, src string) *Script {
	t.Helper()
	s, errs := Parse(json.RawMessage(src))
	if len(errs) > 0 {
		t.Fatalf("Parse: %v", errs)
	}
	return s
}

func mainCaller() delegation.Caller { return delegation.Caller{AgentID: "a0", Name: "main"} }

func turnReq(c delegation.Caller, msgs ...*delegation.Message) *delegation.Request {
	return &delegation.Request{Caller: c, Purpose: delegation.PurposeTurn, Messages: msgs}
}

func user(s string) *delegation.Message {
	return &delegation.Message{Role: delegation.RoleUser, Content: s}
}

func generate(t *testing.T, m *Model, req *delegation.Request) *delegation.Response {
	t.Helper()
	resp, err := m.Generate(context.Background(), req)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	return resp
}

// turnError asserts err is a *TurnError with the given text and turn path.
func turnError(t *testing.T, err error, turn, text string) *TurnError {
	t.Helper()
	var te *TurnError
	if !errors.As(err, &te) {
		t.Fatalf("got error %v (%T), want a *TurnError", err, err)
	}
	if te.Error() != text {
		t.Errorf("error text\n got: %s\nwant: %s", te.Error(), text)
	}
	if te.Turn != turn {
		t.Errorf("Turn = %q, want %q", te.Turn, turn)
	}
	return te
}

func TestTurns(t *testing.T) {
	t.Run("main plays its turns in order and then runs out", func(t *testing.T) {
		m := New(mustParse(t, `{"main": [
			{"tool_calls": [{"name": "write_file", "args": {"file_path": "/order.md", "content": "Order A-7731"}}]},
			{"content": "", "tool_calls": [{"name": "ls", "args": {"path": "/"}, "id": "mine"}]},
			{"content": "Done."}
		]}`))
		r := generate(t, m, turnReq(mainCaller()))
		if r.Content != "" || len(r.ToolCalls) != 1 || r.ToolCalls[0].Name != "write_file" ||
			string(r.ToolCalls[0].Args) != `{"file_path":"/order.md","content":"Order A-7731"}` {
			t.Fatalf("turn 1 = %+v", r)
		}
		r = generate(t, m, turnReq(mainCaller()))
		if len(r.ToolCalls) != 1 || r.ToolCalls[0].Name != "ls" || r.ToolCalls[0].ID != "mine" {
			t.Fatalf("turn 2 = %+v", r)
		}
		r = generate(t, m, turnReq(mainCaller()))
		if r.Content != "Done." || r.ToolCalls != nil {
			t.Fatalf("turn 3 = %+v", r)
		}
		_, err := m.Generate(context.Background(), turnReq(mainCaller()))
		te := turnError(t, err, "script.main[3]",
			`script.main ran out: the main agent asked for turn 4 but the script has 3 turns; add a turn with "content" to end the run`)
		if te.Agent != "main" || te.AgentID != "a0" {
			t.Errorf("Agent, AgentID = %q, %q", te.Agent, te.AgentID)
		}
	})

	t.Run("args missing from a tool call are an empty object", func(t *testing.T) {
		m := New(mustParse(t, `{"main": [{"tool_calls": [{"name": "ls"}]}]}`))
		r := generate(t, m, turnReq(mainCaller()))
		if string(r.ToolCalls[0].Args) != "{}" {
			t.Fatalf("args = %s", r.ToolCalls[0].Args)
		}
	})

	t.Run("each agent has its own cursor", func(t *testing.T) {
		m := New(mustParse(t, `{"main": [{"content": "one"}, {"content": "two"}],
			"helper": [[{"content": "h0"}], [{"content": "h1a"}, {"content": "h1b"}]]}`))
		h1 := delegation.Caller{AgentID: "c2", Name: "helper", Invocation: 1}
		h0 := delegation.Caller{AgentID: "c1", Name: "helper", Invocation: 0}
		got := []string{
			generate(t, m, turnReq(mainCaller())).Content,
			generate(t, m, turnReq(h1)).Content,
			generate(t, m, turnReq(h0)).Content,
			generate(t, m, turnReq(h1)).Content,
			generate(t, m, turnReq(mainCaller())).Content,
		}
		if want := "one h1a h0 h1b two"; strings.Join(got, " ") != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	})

	t.Run("a subagent's list runs out", func(t *testing.T) {
		m := New(mustParse(t, `{"main": [{"content": "x"}], "reporter": [[{"content": "r"}]]}`))
		c := delegation.Caller{AgentID: "c1", Name: "reporter"}
		generate(t, m, turnReq(c))
		_, err := m.Generate(context.Background(), turnReq(c))
		turnError(t, err, "script.reporter[0][1]",
			`script.reporter[0] ran out: the subagent "reporter" (invocation 0) asked for turn 2 but its list has 1 turn; add a turn with "content" to end its run`)
	})
}

func TestInvocations(t *testing.T) {
	s := mustParse(t, `{"main": [{"content": "x"}],
		"reporter": [[{"content": "first"}], [{"content": "second"}]]}`)

	t.Run("the invocation number picks the list", func(t *testing.T) {
		m := New(s)
		for inv, want := range []string{"first", "second"} {
			c := delegation.Caller{AgentID: fmt.Sprintf("r%d", inv), Name: "reporter", Invocation: inv}
			if got := generate(t, m, turnReq(c)).Content; got != want {
				t.Errorf("invocation %d played %q, want %q", inv, got, want)
			}
		}
	})

	t.Run("an invocation past the lists is an error", func(t *testing.T) {
		m := New(s)
		c := delegation.Caller{AgentID: "r2", Name: "reporter", Invocation: 2}
		_, err := m.Generate(context.Background(), turnReq(c))
		turnError(t, err, "script.reporter[2]",
			`script.reporter has no invocation 2: the subagent "reporter" was started 3 times but the script has 2 lists of turns; add one list of turns per invocation`)
	})

	t.Run("a subagent with no entry is an error", func(t *testing.T) {
		m := New(s)
		c := delegation.Caller{AgentID: "x", Name: "researcher"}
		_, err := m.Generate(context.Background(), turnReq(c))
		te := turnError(t, err, "script.researcher",
			`script has no entry for subagent "researcher" (invoked 1 time); add "researcher": [[{"content": "…"}]]`)
		if te.Agent != "researcher" {
			t.Errorf("Agent = %q", te.Agent)
		}
	})

	t.Run("a script without main is an error for the main agent", func(t *testing.T) {
		m := New(mustParse(t, `{"reporter": [[{"content": "r"}]]}`))
		_, err := m.Generate(context.Background(), turnReq(mainCaller()))
		turnError(t, err, "script.main", `script has no entry for the main agent; add "main": [{"content": "…"}]`)
	})

	t.Run("no script at all is an error, not a panic", func(t *testing.T) {
		for _, m := range []*Model{New(nil), New(mustParse(t, ``)), New(mustParse(t, `null`))} {
			if _, err := m.Generate(context.Background(), turnReq(mainCaller())); err == nil {
				t.Fatal("want an error")
			}
		}
	})
}

const casesScript = `{"main": [{"content": "x"}], "reporter": [[{"cases": [
	{"when": {"context_contains": "A-7731", "context_lacks": "SECRET"}, "content": "A-7731"},
	{"when": {"context_contains": "SECRET"}, "content": "I cannot say."},
	{"when": {"context_lacks": "order"}, "content": "What order?"},
	{"content": "I cannot see any order number."}
]}]]}`

func TestCases(t *testing.T) {
	reporter := delegation.Caller{AgentID: "r", Name: "reporter"}
	play := func(t *testing.T, req *delegation.Request) string {
		t.Helper()
		req.Caller = reporter
		return generate(t, New(mustParse(t, casesScript)), req).Content
	}

	t.Run("context_contains finds the text in a message's content", func(t *testing.T) {
		if got := play(t, turnReq(reporter, user("The order is A-7731."))); got != "A-7731" {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("context_contains finds the text in the system prompt", func(t *testing.T) {
		req := turnReq(reporter, user("Report the order number."))
		req.System = "Remember order A-7731."
		if got := play(t, req); got != "A-7731" {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("context_contains finds the text in a tool call's args", func(t *testing.T) {
		req := turnReq(reporter, user("note the order"), &delegation.Message{
			Role: delegation.RoleAssistant,
			ToolCalls: []delegation.ToolCall{{ID: "c", Name: "write_file",
				Args: json.RawMessage(`{"file_path":"/order.md","content":"Order A-7731"}`)}},
		})
		if got := play(t, req); got != "A-7731" {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("context_contains finds escaped text in args once decoded", func(t *testing.T) {
		m := New(mustParse(t, `{"main": [{"cases": [
			{"when": {"context_contains": "<A-7731>\nend"}, "content": "found"}, {"content": "missed"}]}]}`))
		req := turnReq(mainCaller(), &delegation.Message{Role: delegation.RoleAssistant,
			ToolCalls: []delegation.ToolCall{{Name: "write_file", Args: json.RawMessage(`{"content":"\u003cA-7731\u003e\nend"}`)}}})
		if got := generate(t, m, req).Content; got != "found" {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("context_contains finds a tool call's name", func(t *testing.T) {
		m := New(mustParse(t, `{"main": [{"cases": [
			{"when": {"context_contains": "write_file"}, "content": "found"}, {"content": "missed"}]}]}`))
		req := turnReq(mainCaller(), &delegation.Message{Role: delegation.RoleAssistant,
			ToolCalls: []delegation.ToolCall{{Name: "write_file", Args: json.RawMessage(`{}`)}}})
		if got := generate(t, m, req).Content; got != "found" {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("both conditions must hold", func(t *testing.T) {
		if got := play(t, turnReq(reporter, user("order A-7731, SECRET"))); got != "I cannot say." {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("context_lacks alone chooses when the text is absent", func(t *testing.T) {
		if got := play(t, turnReq(reporter, user("hello"))); got != "What order?" {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("a case without when is the fallback", func(t *testing.T) {
		if got := play(t, turnReq(reporter, user("the order was lost"))); got != "I cannot see any order number." {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("no case holding is an error", func(t *testing.T) {
		m := New(mustParse(t, `{"reporter": [[{"content": "a"}, {"cases": [
			{"when": {"context_contains": "A-7731"}, "content": "A-7731"}]}]]}`))
		generate(t, m, turnReq(reporter))
		_, err := m.Generate(context.Background(), turnReq(reporter, user("nothing here")))
		turnError(t, err, "script.reporter[0][1]",
			`script.reporter[0][1]: no case holds for the current context; add a case without "when" as a fallback`)
	})
	t.Run("a case's tool calls and delay are played", func(t *testing.T) {
		m := New(mustParse(t, `{"main": [{"cases": [
			{"when": {"context_contains": "go"}, "delay_ms": 1, "tool_calls": [{"name": "ls", "args": {"path": "/"}}]},
			{"content": "no"}]}]}`))
		r := generate(t, m, turnReq(mainCaller(), user("go")))
		if len(r.ToolCalls) != 1 || r.ToolCalls[0].ID != "call_a0_0_0" {
			t.Fatalf("got %+v", r)
		}
	})
}

func TestSummary(t *testing.T) {
	sumReq := func(msgs ...*delegation.Message) *delegation.Request {
		return &delegation.Request{Caller: mainCaller(), Purpose: delegation.PurposeSummary, Messages: msgs}
	}

	t.Run("a summary turn is played for a summary request and consumed", func(t *testing.T) {
		m := New(mustParse(t, `{"main": [{"content": "a", "tool_calls": [{"name": "ls"}]},
			{"summary": "We noted order A-7731."}, {"content": "done"}]}`))
		generate(t, m, turnReq(mainCaller()))
		if got := generate(t, m, sumReq(user("x"))).Content; got != "We noted order A-7731." {
			t.Fatalf("summary = %q", got)
		}
		if got := generate(t, m, turnReq(mainCaller())).Content; got != "done" {
			t.Fatalf("turn after summary = %q", got)
		}
	})

	t.Run("a turn request meeting a summary turn is an error", func(t *testing.T) {
		m := New(mustParse(t, `{"main": [{"content": "a", "tool_calls": [{"name": "ls"}]}, {"summary": "s"}]}`))
		generate(t, m, turnReq(mainCaller()))
		_, err := m.Generate(context.Background(), turnReq(mainCaller()))
		turnError(t, err, "script.main[1]",
			`script.main[1] is a "summary" turn, but the engine asked for the main agent's next turn: the summarization the script expected did not happen; remove the summary turn, or let the context reach agent.summarization.max_tokens before it`)
	})

	history := []*delegation.Message{
		{Role: delegation.RoleUser, Kind: delegation.KindPrompt, Content: "Note the order number,\nthen have a helper report it."},
		{Role: delegation.RoleAssistant, ToolCalls: []delegation.ToolCall{
			{ID: "c1", Name: "write_file", Args: json.RawMessage(`{"file_path":"/order.md","content":"Order A-7731"}`)}}},
		{Role: delegation.RoleTool, ToolCallID: "c1", Content: "Updated file /order.md"},
		{Role: delegation.RoleAssistant, Content: "Now the helper.", ToolCalls: []delegation.ToolCall{
			{ID: "c2", Name: "task", Args: json.RawMessage(`{"description":"Report it","subagent_type":"reporter"}`)}}},
		{Role: delegation.RoleTool, ToolCallID: "c2", Kind: delegation.KindReceipt, Content: "A-7731"},
		{Role: delegation.RoleAssistant, ToolCalls: []delegation.ToolCall{
			{ID: "c3", Name: "read_file", Args: json.RawMessage(`{"file_path":"/missing.md"}`)}}},
		{Role: delegation.RoleTool, ToolCallID: "c3", IsError: true, Content: "Error: file /missing.md not found"},
		{Role: delegation.RoleAssistant, Content: strings.Repeat("a very long reply ", 40)},
	}

	t.Run("without a summary turn the model writes one and uses no turn", func(t *testing.T) {
		m := New(mustParse(t, `{"main": [{"content": "done"}]}`))
		a := generate(t, m, sumReq(history...)).Content
		b := generate(t, New(mustParse(t, `{"main": [{"content": "done"}]}`)), sumReq(history...)).Content
		if a != b {
			t.Fatalf("not deterministic:\n%s\n---\n%s", a, b)
		}
		if !strings.HasPrefix(a, "Summary of 8 earlier messages:") {
			t.Errorf("summary does not start with the count:\n%s", a)
		}
		if got := generate(t, m, turnReq(mainCaller())).Content; got != "done" {
			t.Errorf("a turn was used: next turn played %q", got)
		}
		if len(a) > 600 {
			t.Errorf("summary is %d bytes, want a few hundred at most:\n%s", len(a), a)
		}
		for _, line := range strings.Split(a, "\n") {
			if n := utf8.RuneCountInString(line); n > 80 {
				t.Errorf("line of %d runes: %q", n, line)
			}
		}
		for _, want := range []string{"the user: Note the order number, then", "write_file(/order.md)"} {
			if !strings.Contains(a, want) {
				t.Errorf("summary lacks %q:\n%s", want, a)
			}
		}
		t.Logf("\n%s", a)
	})

	t.Run("a short history gets a line per message", func(t *testing.T) {
		got := AutoSummary(history[:3])
		want := "Summary of 3 earlier messages:\n" +
			"- the user: Note the order number, then have a helper report it.\n" +
			"- the agent called write_file(/order.md)\n" +
			"- write_file returned: Updated file /order.md"
		if got != want {
			t.Fatalf("got\n%s\nwant\n%s", got, want)
		}
	})

	t.Run("a long history stays bounded and counts what it skips", func(t *testing.T) {
		var long []*delegation.Message
		for i := 0; i < 1000; i++ {
			long = append(long, user(fmt.Sprintf("message %d %s", i, strings.Repeat("x", 200))))
		}
		got := AutoSummary(long)
		if !strings.HasPrefix(got, "Summary of 1000 earlier messages:") || !strings.Contains(got, "995 more messages") {
			t.Fatalf("got\n%s", got)
		}
		if len(got) > 600 {
			t.Fatalf("summary of 1000 messages is %d bytes", len(got))
		}
	})
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name, script, field, message string
	}{
		{"a script that is not an object", `[1]`, "script",
			`must be an object: "main" and one entry per subagent, like {"main": [{"content": "Done."}]}; got a list`},
		{"main that is not a list", `{"main": {"content": "x"}}`, "script.main",
			`must be a list of turns, like [{"content": "Done."}]; got an object`},
		{"an empty main", `{"main": []}`, "script.main", `has no turns; add at least one, like {"content": "Done."}`},
		{"a turn of unknown shape", `{"main": [{"content": "a"}, {"delay_ms": 5}]}`, "script.main[1]",
			`a turn needs "content" and/or "tool_calls", or "cases", or "summary"`},
		{"a turn that is not an object", `{"main": ["hello"]}`, "script.main[0]",
			`must be a turn: an object with "content" and/or "tool_calls", or "cases", or "summary"; got a string`},
		{"an unknown field", `{"main": [{"content": "a", "delay": 5}]}`, "script.main[0].delay",
			`unknown field; a turn has "content", "tool_calls", "delay_ms", "cases" and "summary"`},
		{"a tool call without name", `{"main": [{"tool_calls": [{"name": "ls"}, {"args": {}}]}]}`, "script.main[0].tool_calls[1].name",
			`a tool call needs a "name", like "write_file"`},
		{"args that is not an object", `{"main": [{"tool_calls": [{"name": "ls", "args": "/"}]}]}`, "script.main[0].tool_calls[0].args",
			`must be an object of the tool's arguments, like {"file_path": "/a.md"}; got a string`},
		{"content that is not a string", `{"main": [{"content": 5}]}`, "script.main[0].content",
			`must be the text the agent says; got a number`},
		{"a negative delay", `{"main": [{"content": "a", "delay_ms": -1}]}`, "script.main[0].delay_ms",
			`must be a whole number of milliseconds, 0 or more; got -1`},
		{"a delay past the limit", `{"main": [{"content": "a", "delay_ms": 3600000}]}`, "script.main[0].delay_ms",
			`is 3600000 ms; the most a turn may wait is 600000 ms`},
		{"a subagent entry that is a list of turns", `{"reporter": [{"content": "a"}, {"content": "b"}]}`, "script.reporter[0]",
			`must be a list of turns, but it is a turn: each entry of script.reporter is the turns of one invocation of "reporter"; wrap the turns in another list, like "reporter": [[{"content": "…"}]]`},
		{"a subagent entry that is not a list", `{"reporter": "hi"}`, "script.reporter",
			`must be a list with one list of turns per invocation of "reporter", like "reporter": [[{"content": "…"}]]; got a string`},
		{"cases mixed with content", `{"main": [{"cases": [{"content": "a"}], "content": "b"}]}`, "script.main[0]",
			`"cases" cannot be combined with "content", "tool_calls" or "delay_ms" in one turn; put them inside each case`},
		{"a case after the fallback", `{"main": [{"cases": [{"content": "a"}, {"when": {"context_contains": "x"}, "content": "b"}]}]}`,
			"script.main[0].cases[1]", `can never be played: case 0 has no "when", so it always holds; put the case without "when" last`},
		{"an empty when", `{"main": [{"cases": [{"when": {}, "content": "a"}]}]}`, "script.main[0].cases[0].when",
			`needs "context_contains" and/or "context_lacks"; leave "when" out for a case that always holds`},
		{"an empty needle", `{"main": [{"cases": [{"when": {"context_contains": ""}, "content": "a"}]}]}`,
			"script.main[0].cases[0].when.context_contains", `is empty; give the text to look for`},
		{"a case with nothing to play", `{"main": [{"cases": [{"when": {"context_lacks": "x"}}]}]}`, "script.main[0].cases[0]",
			`a case needs "content" and/or "tool_calls"`},
		{"a summary mixed with content", `{"main": [{"summary": "s", "content": "c"}]}`, "script.main[0]",
			`a "summary" turn stands alone: it is played only when the engine summarizes; put "content", "tool_calls" or "cases" in a turn of their own`},
		{"an empty summary", `{"main": [{"summary": ""}]}`, "script.main[0].summary",
			`is empty; write the summary the agent should continue from`},
		{"an empty tool call list and no content", `{"main": [{"tool_calls": []}]}`, "script.main[0]",
			`a turn says nothing: "tool_calls" is empty and there is no "content"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, errs := Parse(json.RawMessage(c.script))
			for _, e := range errs {
				if e.Field == c.field && e.Message == c.message {
					return
				}
			}
			t.Fatalf("want %s: %s\n got: %v", c.field, c.message, errs)
		})
	}

	t.Run("every problem is reported at once", func(t *testing.T) {
		_, errs := Parse(json.RawMessage(`{
			"main": [{"tool_calls": [{"args": []}]}, {}],
			"reporter": [[{"content": 1}]]}`))
		fields := []string{}
		for _, e := range errs {
			fields = append(fields, e.Field)
		}
		want := "script.main[0].tool_calls[0].name script.main[0].tool_calls[0].args script.main[1] script.reporter[0][0].content"
		if strings.Join(fields, " ") != want {
			t.Fatalf("fields = %v\nwant %s\n%v", fields, want, errs)
		}
	})

	t.Run("a well-formed script has no problems", func(t *testing.T) {
		_, errs := Parse(json.RawMessage(`{"main": [
			{"tool_calls": [{"name": "write_file", "args": {"file_path": "/order.md", "content": "Order A-7731"}}]},
			{"content": "", "tool_calls": [{"name": "task", "args": {"description": "d", "subagent_type": "reporter"}, "id": "t1"}], "delay_ms": 250},
			{"summary": "s", "delay_ms": 10},
			{"content": "The helper says A-7731."}],
			"reporter": [[{"cases": [{"when": {"context_contains": "A-7731", "context_lacks": "x"}, "content": "A-7731"}, {"content": "no"}]}]]}`))
		if len(errs) > 0 {
			t.Fatal(errs)
		}
	})
}

func TestKeys(t *testing.T) {
	s := mustParse(t, `{"zeta": [[{"content": "z"}]], "main": [{"content": "m"}, {"content": "n"}],
		"alpha": [[{"content": "a"}], [{"content": "b"}, {"content": "c"}]]}`)
	if got := strings.Join(s.Keys(), " "); got != "main alpha zeta" {
		t.Errorf("Keys = %q", got)
	}
	if got := fmt.Sprint(s.TurnCounts("main"), s.TurnCounts("alpha"), s.TurnCounts("nobody")); got != "[2] [1 2] []" {
		t.Errorf("TurnCounts = %s", got)
	}
	if keys := mustParse(t, ``).Keys(); len(keys) != 0 {
		t.Errorf("an empty script has keys %v", keys)
	}
}

func TestIDs(t *testing.T) {
	src := `{"main": [
		{"tool_calls": [{"name": "ls"}, {"name": "ls"}, {"name": "ls", "id": "given"}]},
		{"tool_calls": [{"name": "ls"}]}],
		"helper": [[{"tool_calls": [{"name": "ls"}]}], [{"tool_calls": [{"name": "ls"}]}]]}`
	run := func() []string {
		m := New(mustParse(t, src))
		var ids []string
		for _, c := range []delegation.Caller{mainCaller(), mainCaller(),
			{AgentID: "h0", Name: "helper"}, {AgentID: "h1", Name: "helper", Invocation: 1}} {
			for _, tc := range generate(t, m, turnReq(c)).ToolCalls {
				ids = append(ids, tc.ID)
			}
		}
		return ids
	}
	a, b := run(), run()
	t.Run("generated ids are deterministic", func(t *testing.T) {
		if strings.Join(a, " ") != strings.Join(b, " ") {
			t.Fatalf("%v != %v", a, b)
		}
		if want := "call_a0_0_0 call_a0_0_1 given call_a0_1_0 call_h0_0_0 call_h1_0_0"; strings.Join(a, " ") != want {
			t.Fatalf("ids = %v, want %s", a, want)
		}
	})
	t.Run("generated ids are unique in the session", func(t *testing.T) {
		seen := map[string]bool{}
		for _, id := range a {
			if seen[id] {
				t.Fatalf("id %q twice", id)
			}
			seen[id] = true
		}
	})
	t.Run("changing the returned args leaves the script alone", func(t *testing.T) {
		m := New(mustParse(t, `{"main": [{"tool_calls": [{"name": "ls", "args": {"path": "/"}}]}]}`))
		r := generate(t, m, turnReq(mainCaller()))
		r.ToolCalls[0].Args[2] = 'X'
		r2 := generate(t, New(m.script), turnReq(mainCaller()))
		if string(r2.ToolCalls[0].Args) != `{"path":"/"}` {
			t.Fatalf("script changed: %s", r2.ToolCalls[0].Args)
		}
	})
}

func TestDelay(t *testing.T) {
	t.Run("the delay is waited out", func(t *testing.T) {
		m := New(mustParse(t, `{"main": [{"content": "slow", "delay_ms": 30}]}`))
		start := time.Now()
		r := generate(t, m, turnReq(mainCaller()))
		if el := time.Since(start); el < 30*time.Millisecond {
			t.Errorf("returned after %v, before the 30 ms delay", el)
		}
		if r.Content != "slow" {
			t.Errorf("content = %q", r.Content)
		}
	})

	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("a cancelled context ends a long delay (stream %v)", stream), func(t *testing.T) {
			m := New(mustParse(t, `{"main": [{"content": "never said in full", "delay_ms": 600000}]}`))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			req := turnReq(mainCaller())
			if stream {
				req.Stream = func(string) {}
			}
			done := make(chan error, 1)
			go func() {
				_, err := m.Generate(ctx, req)
				done <- err
			}()
			select {
			case err := <-done:
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("err = %v, want the context's error", err)
				}
				if !strings.Contains(err.Error(), "script.main[0]") {
					t.Errorf("error does not name the turn: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Generate did not return after the context was cancelled")
			}
		})
	}

	t.Run("an already cancelled context returns its error", func(t *testing.T) {
		m := New(mustParse(t, `{"main": [{"content": "x"}]}`))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := m.Generate(ctx, turnReq(mainCaller())); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestStream(t *testing.T) {
	const content = "  The helper says\nA-7731, and   nothing else.  "
	t.Run("an instant turn is not streamed", func(t *testing.T) {
		m := New(mustParse(t, `{"main": [{"content": "at once"}]}`))
		req := turnReq(mainCaller())
		req.Stream = func(s string) { t.Fatalf("streamed %q", s) }
		if r := generate(t, m, req); r.Content != "at once" {
			t.Fatalf("Content = %q", r.Content)
		}
	})
	for _, delay := range []int{40} {
		t.Run(fmt.Sprintf("stream gets the content in pieces (delay %d ms)", delay), func(t *testing.T) {
			m := New(mustParse(t, fmt.Sprintf(`{"main": [{"content": %q, "delay_ms": %d}]}`, content, delay)))
			var pieces []string
			req := turnReq(mainCaller())
			req.Stream = func(s string) { pieces = append(pieces, s) }
			r := generate(t, m, req)
			if r.Content != content {
				t.Fatalf("Content = %q", r.Content)
			}
			if got := strings.Join(pieces, ""); got != content {
				t.Fatalf("pieces join to %q", got)
			}
			if len(pieces) < 4 {
				t.Fatalf("only %d pieces: %q", len(pieces), pieces)
			}
		})
	}
	t.Run("the pieces are spread across the delay", func(t *testing.T) {
		const delay = 200 * time.Millisecond
		var times []time.Time
		if err := think(context.Background(), delay, "one two three four five", func(string) { times = append(times, time.Now()) }); err != nil {
			t.Fatal(err)
		}
		// Loose on purpose: pieces sent at 40, 80, … 200 ms are 160 ms apart;
		// pieces all sent at once would be microseconds apart.
		if spread := times[len(times)-1].Sub(times[0]); spread < delay/4 {
			t.Fatalf("first and last piece %v apart over a %v delay", spread, delay)
		}
	})
	t.Run("a summary turn with a delay is streamed too", func(t *testing.T) {
		m := New(mustParse(t, `{"main": [{"summary": "We noted the order.", "delay_ms": 20}]}`))
		var b strings.Builder
		req := &delegation.Request{Caller: mainCaller(), Purpose: delegation.PurposeSummary, Stream: func(s string) { b.WriteString(s) }}
		if r := generate(t, m, req); r.Content != b.String() || r.Content != "We noted the order." {
			t.Fatalf("content %q, streamed %q", r.Content, b.String())
		}
	})
	t.Run("a long text over a short delay still arrives whole", func(t *testing.T) {
		long := strings.Repeat("word ", 5000)
		var b strings.Builder
		n := 0
		if err := think(context.Background(), 20*time.Millisecond, long, func(s string) { b.WriteString(s); n++ }); err != nil {
			t.Fatal(err)
		}
		if b.String() != long || n != 5000 {
			t.Fatalf("streamed %d pieces, whole text %v", n, b.String() == long)
		}
	})
}

func TestConcurrentAgents(t *testing.T) {
	t.Run("eight agents generate at once", func(t *testing.T) {
		var b strings.Builder
		b.WriteString(`{"main": [{"content": "m"}], "worker": [`)
		for i := 0; i < 8; i++ {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `[{"tool_calls": [{"name": "ls"}], "delay_ms": 2}, {"cases": [{"when": {"context_contains": "go %d"}, "content": "w%d"}, {"content": "lost"}]}]`, i, i)
		}
		b.WriteString("]}")
		m := New(mustParse(t, b.String()))
		var wg sync.WaitGroup
		got := make([]string, 8)
		errs := make([]error, 8)
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := delegation.Caller{AgentID: fmt.Sprintf("w%d", i), Name: "worker", Invocation: i}
				req := turnReq(c, user(fmt.Sprintf("go %d", i)))
				req.Stream = func(string) {}
				if _, err := m.Generate(context.Background(), req); err != nil {
					errs[i] = err
					return
				}
				r, err := m.Generate(context.Background(), req)
				if err != nil {
					errs[i] = err
					return
				}
				got[i] = r.Content
			}()
		}
		wg.Wait()
		for i := range got {
			if errs[i] != nil || got[i] != fmt.Sprintf("w%d", i) {
				t.Errorf("worker %d: %q, %v", i, got[i], errs[i])
			}
		}
	})
}

func BenchmarkGenerate(b *testing.B) {
	for _, bc := range []struct{ name, script string }{
		{"content", `{"main": [{"content": "The helper says A-7731."}]}`},
		{"tool_call", `{"main": [{"tool_calls": [{"name": "read_file", "args": {"file_path": "/order.md"}}]}]}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			m := New(mustParse(b, bc.script))
			req := turnReq(mainCaller())
			ctx := context.Background()
			if _, err := m.Generate(ctx, req); err != nil {
				b.Fatal(err)
			}
			c := m.cursors["a0"]
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// Rewinding the cursor replays the one turn: a fresh Model per
				// iteration would measure the map, not the turn.
				c.next = 0
				if _, err := m.Generate(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
