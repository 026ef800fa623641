package delegation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func names(tools []ToolDef) []string {
	out := make([]string, len(tools))
	for i, t := range tools {
		out[i] = t.Name
	}
	return out
}

func TestSection1ToolStack(t *testing.T) {
	t.Run("the main agent has eight tools in order", func(t *testing.T) {
		team := mustTeam(t, TeamSpec{})
		want := []string{"ls", "read_file", "write_file", "edit_file", "delete", "glob", "grep", "task"}
		if got := names(team.MainTools()); !reflect.DeepEqual(got, want) {
			t.Fatalf("tools = %v, want %v", got, want)
		}
	})
	t.Run("write_todos is opt-in", func(t *testing.T) {
		team := mustTeam(t, TeamSpec{Main: MainSpec{Tools: append(DefaultTools(), WriteTodosToolName)}})
		if got := names(team.MainTools()); got[len(got)-1] != WriteTodosToolName {
			t.Fatalf("tools = %v, want write_todos listed", got)
		}
	})

	w := newWorkspace(map[string]string{"/a.md": "one\ntwo\nthree", "/docs/b.md": "two words\nthree", "/docs/deep/c.txt": "two"})
	cases := []struct {
		name, tool, args, want string
		isErr                  bool
	}{
		{"ls lists a directory", "ls", `{"path":"/"}`, "/a.md\n/docs/", false},
		{"read_file numbers lines like cat -n", "read_file", `{"file_path":"/a.md","offset":1,"limit":1}`, "     2\ttwo\n(1 more lines; read on with offset 2)", false},
		{"read_file of a missing file is an error", "read_file", `{"file_path":"/nope.md"}`, "File '/nope.md' not found; ls or glob shows what exists.", true},
		{"write_file refuses to overwrite", "write_file", `{"file_path":"/a.md","content":"x"}`, "Cannot write to '/a.md' because it already exists; read it, then change it with edit_file.", true},
		{"edit_file needs exactly one match", "edit_file", `{"file_path":"/docs/b.md","old_string":"t","new_string":"T"}`, "old_string appears 2 times in '/docs/b.md'; include more surrounding text so it matches once, or set replace_all.", true},
		{"a relative path is rejected", "read_file", `{"file_path":"a.md"}`, "Path 'a.md' is not allowed: paths are absolute, like /notes.md.", true},
		{"a path with .. is rejected", "read_file", `{"file_path":"/docs/../a.md"}`, "Path '/docs/../a.md' is not allowed: '..' cannot be used; give the absolute path.", true},
		{"glob with ** crosses directories", "glob", `{"pattern":"**/*.md"}`, "/a.md\n/docs/b.md", false},
		{"glob * stays in one directory", "glob", `{"pattern":"*","path":"/docs"}`, "/docs/b.md", false},
		{"grep lists files by default", "grep", `{"pattern":"two"}`, "/a.md\n/docs/b.md\n/docs/deep/c.txt", false},
		{"grep content mode", "grep", `{"pattern":"three","output_mode":"content","glob":"*.md"}`, "/a.md:3:three\n/docs/b.md:2:three", false},
		{"grep count mode under a path", "grep", `{"pattern":"two","output_mode":"count","path":"/docs"}`, "/docs/b.md:1\n/docs/deep/c.txt:1", false},
		{"a wrong argument type names the argument", "read_file", `{"file_path":"/a.md","limit":"ten"}`, "Invalid arguments for read_file: limit must be an integer, not string.", true},
		{"a missing argument is named", "edit_file", `{"file_path":"/a.md"}`, "Invalid arguments for edit_file: missing old_string.", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := stackTool(c.tool).run(context.Background(), w, json.RawMessage(c.args))
			if c.isErr {
				var te *toolError
				if !errors.As(err, &te) {
					t.Fatalf("err = %v, want a tool error", err)
				}
				out = err.Error()
			} else if err != nil {
				t.Fatalf("err = %v", err)
			}
			if out != c.want {
				t.Fatalf("got %q, want %q", out, c.want)
			}
		})
	}
	t.Run("write, edit and delete change the workspace and record the changes", func(t *testing.T) {
		w := newWorkspace(nil)
		for _, step := range []struct{ tool, args string }{
			{"write_file", `{"file_path":"/x.md","content":"hello world"}`},
			{"edit_file", `{"file_path":"/x.md","old_string":"world","new_string":"there"}`},
			{"write_file", `{"file_path":"/y.md","content":""}`},
			{"delete", `{"file_path":"/y.md"}`},
		} {
			if _, err := stackTool(step.tool).run(context.Background(), w, json.RawMessage(step.args)); err != nil {
				t.Fatalf("%s: %v", step.tool, err)
			}
		}
		if got, want := w.files["/x.md"], "hello there"; got != want {
			t.Fatalf("/x.md = %q, want %q", got, want)
		}
		want := []FileChange{{Path: "/x.md", Content: "hello there"}, {Path: "/y.md", Deleted: true}}
		if !reflect.DeepEqual(w.changes, want) {
			t.Fatalf("changes = %+v, want %+v", w.changes, want)
		}
	})
	t.Run("a tool error reaches the model as an error result and the run goes on", func(t *testing.T) {
		r := runSession(t, TeamSpec{}, map[string][]fakeTurn{"main": {
			{calls: []ToolCall{call("read_file", map[string]string{"file_path": "../etc/passwd"})}},
			{calls: []ToolCall{call("no_such_tool", map[string]string{})}},
			{content: "done"},
		}}, nil)
		if r.res.Status != StatusDone {
			t.Fatalf("status = %s (%v)", r.res.Status, r.res.Err)
		}
		msgs := r.messages("main")
		if !msgs[2].IsError || !strings.Contains(msgs[2].Content, "not allowed") {
			t.Fatalf("path result = %+v", msgs[2])
		}
		if !msgs[4].IsError || !strings.HasPrefix(msgs[4].Content, "Unknown tool 'no_such_tool'") {
			t.Fatalf("unknown tool result = %+v", msgs[4])
		}
	})
}

func TestSection2Specs(t *testing.T) {
	fieldErrors := func(t *testing.T, ts TeamSpec) FieldErrors {
		t.Helper()
		_, err := BuildTeam(ts)
		var fe FieldErrors
		if !errors.As(err, &fe) {
			t.Fatalf("BuildTeam error = %v, want FieldErrors", err)
		}
		return fe
	}
	t.Run("every error is reported at once, each at its field, with the exact text", func(t *testing.T) {
		fe := fieldErrors(t, TeamSpec{Subagents: []Spec{
			{Name: "x", Description: "d", Mode: "shared"},
			{Name: "x", Description: "d"},
			{Name: "f", Description: "d", Mode: ModeFork, Skills: []string{"s"}},
			{Name: "r", Description: "d", ResponseFormat: json.RawMessage(`"Findings"`)},
			{Name: "n", Description: "d", ResponseFormat: json.RawMessage(`42`)},
			{Name: "t", Description: "d", Tools: []string{"read_file", "browse"}},
			{Name: "", Description: "d"},
			{Name: "nodesc"},
		}})
		want := FieldErrors{
			{Field: "subagents[0].mode", Message: "SubAgent 'x' has invalid mode 'shared'; expected 'isolated' or 'fork'"},
			{Field: "subagents[1].name", Message: "Duplicate subagent name 'x'; each subagent must have a unique name."},
			{Field: "subagents[2].skills", Message: "SubAgent 'f' cannot set skills under mode='fork'; the parent's skills are inherited instead."},
			{Field: "subagents[3].response_format", Message: `SubAgent 'r' has unsupported response_format of type string; expected a JSON Schema object with a "title"`},
			{Field: "subagents[4].response_format", Message: `SubAgent 'n' has unsupported response_format of type number; expected a JSON Schema object with a "title"`},
			{Field: "subagents[5].tools[1]", Message: "SubAgent 't' has unknown tool 'browse'; the tools are ls, read_file, write_file, edit_file, delete, glob, grep, write_todos"},
			{Field: "subagents[6].name", Message: "every subagent needs a name: it is what the parent puts in subagent_type"},
			{Field: "subagents[7].description", Message: "SubAgent 'nodesc' needs a description: it is the line the parent reads when choosing whom to delegate to"},
		}
		if !reflect.DeepEqual(fe, want) {
			t.Fatalf("errors =\n%v\nwant\n%v", fe, want)
		}
	})
	t.Run("handoff is accepted as an old name for isolated", func(t *testing.T) {
		team := mustTeam(t, TeamSpec{Subagents: []Spec{{Name: "h", Description: "d", Mode: "handoff"}}})
		if got := team.Subagent("h").Mode; got != ModeIsolated {
			t.Fatalf("mode = %q, want isolated", got)
		}
	})
	t.Run("an empty list still gets general-purpose", func(t *testing.T) {
		team := mustTeam(t, TeamSpec{})
		if got := team.Names(); !reflect.DeepEqual(got, []string{"general-purpose"}) {
			t.Fatalf("names = %v", got)
		}
	})
	t.Run("general-purpose is listed first", func(t *testing.T) {
		team := mustTeam(t, TeamSpec{Subagents: []Spec{{Name: "researcher", Description: "d"}}})
		if got := team.Names(); !reflect.DeepEqual(got, []string{"general-purpose", "researcher"}) {
			t.Fatalf("names = %v", got)
		}
	})
	t.Run("turned off with no subagent fails with the exact text", func(t *testing.T) {
		fe := fieldErrors(t, TeamSpec{Main: MainSpec{NoGeneralPurpose: true}})
		if got, want := fe, (FieldErrors{{Field: "subagents", Message: "At least one subagent must be specified"}}); !reflect.DeepEqual(got, want) {
			t.Fatalf("errors = %v, want %v", got, want)
		}
	})
	t.Run("a declared general-purpose replaces the built-in one, prompt included", func(t *testing.T) {
		team := mustTeam(t, TeamSpec{Subagents: []Spec{{Name: "general-purpose", Description: "mine"}}})
		if got := len(team.Subagents); got != 1 {
			t.Fatalf("subagents = %d, want 1", got)
		}
		if sp := team.Subagent("general-purpose").SystemPrompt; sp != "" {
			t.Fatalf("system prompt = %q, want none", sp)
		}
	})
	t.Run("response_format needs a title and an object type", func(t *testing.T) {
		fe := fieldErrors(t, TeamSpec{Subagents: []Spec{
			{Name: "a", Description: "d", ResponseFormat: json.RawMessage(`{"type":"object"}`)},
			{Name: "b", Description: "d", ResponseFormat: json.RawMessage(`{"title":"B","type":"array"}`)},
		}})
		if len(fe) != 2 || !strings.Contains(fe[0].Message, `without a "title"`) || !strings.Contains(fe[1].Message, "must be of type 'object'") {
			t.Fatalf("errors = %v", fe)
		}
	})
	t.Run("an unknown main tool is an error at its field", func(t *testing.T) {
		fe := fieldErrors(t, TeamSpec{Main: MainSpec{Tools: []string{"ls", "shell"}}})
		if fe[0].Field != "agent.tools[1]" {
			t.Fatalf("errors = %v", fe)
		}
	})
	t.Run("a fork's own tools are used, with task, and no warning", func(t *testing.T) {
		team := mustTeam(t, TeamSpec{Subagents: []Spec{{Name: "f", Description: "d", Mode: ModeFork, Tools: []string{"read_file"}}}})
		if len(team.Warnings) != 0 {
			t.Fatalf("warnings = %v", team.Warnings)
		}
		if got, want := names(team.SubagentTools("f")), []string{"read_file", "task"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("tools = %v, want %v", got, want)
		}
	})
	t.Run("errors are found before any model call", func(t *testing.T) {
		_, err := BuildTeam(TeamSpec{Subagents: []Spec{{Name: "x", Description: "d", Mode: "shared"}}})
		if err == nil {
			t.Fatal("want an error")
		}
	})
}

func TestSection3TaskTool(t *testing.T) {
	desc := func(t *testing.T, ts TeamSpec) string {
		t.Helper()
		tools := mustTeam(t, ts).MainTools()
		return tools[len(tools)-1].Description
	}
	base := desc(t, TeamSpec{})
	t.Run("the description lists general-purpose by default", func(t *testing.T) {
		if !strings.Contains(base, "\n- general-purpose: General-purpose agent for") {
			t.Fatalf("description lacks the default line:\n%s", base)
		}
	})
	t.Run("a researcher adds a line", func(t *testing.T) {
		d := desc(t, TeamSpec{Subagents: []Spec{{Name: "researcher", Description: "Finds sources."}}})
		if !strings.Contains(d, "\n- researcher: Finds sources.") {
			t.Fatalf("no researcher line:\n%s", d)
		}
		if got, want := len(d), len(base)+len("\n- researcher: Finds sources."); got != want {
			t.Fatalf("len = %d, want %d", got, want)
		}
	})
	t.Run("overriding general-purpose loses the default line", func(t *testing.T) {
		d := desc(t, TeamSpec{Subagents: []Spec{{Name: "general-purpose", Description: "Mine."}}})
		if strings.Contains(d, "General-purpose agent for") || !strings.Contains(d, "- general-purpose: Mine.") {
			t.Fatalf("description:\n%s", d)
		}
		if len(d) >= len(base) {
			t.Fatalf("len = %d, want shorter than %d", len(d), len(base))
		}
	})
	t.Run("a fork line carries the suffix", func(t *testing.T) {
		d := desc(t, TeamSpec{Subagents: []Spec{{Name: "iso1", Description: "Works alone."}, {Name: "fk1", Description: "Continues.", Mode: ModeFork}}})
		if !strings.Contains(d, "- fk1: Continues."+ForkSuffix+"\n") {
			t.Fatalf("fork line lacks the suffix:\n%s", d)
		}
		if strings.Contains(d, "- iso1: Works alone."+ForkSuffix) {
			t.Fatal("isolated line has the suffix")
		}
	})
	t.Run("the fixed text says what the spec requires", func(t *testing.T) {
		for _, s := range []string{"ephemeral subagent", "run concurrently", "stateless", "unless the subagent's line says it inherits your conversation", "say exactly what the report should contain", "not to the user"} {
			if !strings.Contains(base, s) {
				t.Errorf("description lacks %q", s)
			}
		}
	})
	t.Run("an unknown type returns the exact text and the run goes on", func(t *testing.T) {
		r := runSession(t, TeamSpec{}, map[string][]fakeTurn{"main": {
			{calls: []ToolCall{task("look it up", "researcher")}},
			{content: "I will do it myself."},
		}}, nil)
		if r.res.Status != StatusDone {
			t.Fatalf("status = %s", r.res.Status)
		}
		got := r.messages("main")[2]
		want := "We cannot invoke subagent researcher because it does not exist, the only allowed types are `general-purpose`"
		if got.Content != want || got.IsError || got.Kind != KindRefusal {
			t.Fatalf("result = %+v, want %q", got, want)
		}
		if n := len(r.ofType(EventDelegationRefused)); n != 1 {
			t.Fatalf("delegation.refused events = %d", n)
		}
	})
	t.Run("allowed types are all listed in backticks", func(t *testing.T) {
		got := UnknownTypeMessage("x", []string{"general-purpose", "researcher"})
		if !strings.HasSuffix(got, "`general-purpose`, `researcher`") {
			t.Fatalf("got %q", got)
		}
	})
}

func TestSection4WhatAChildSees(t *testing.T) {
	parentPrompt := "You are the parent."
	ts := TeamSpec{Main: MainSpec{SystemPrompt: parentPrompt}, Subagents: []Spec{
		{Name: "iso", Description: "isolated helper", SystemPrompt: "Be brief."},
		{Name: "fk", Description: "fork helper", SystemPrompt: "Be brief.", Mode: ModeFork},
	}}
	turns := map[string][]fakeTurn{
		"main": {
			{calls: []ToolCall{call("write_file", map[string]string{"file_path": "/order.md", "content": "Order A-7731"})}},
			{content: "noted", calls: []ToolCall{task("Report the order number above.", "iso")}},
			{calls: []ToolCall{task("Report the order number above.", "fk")}},
			{content: "done"},
		},
		"iso#0": {{content: "I cannot see any order number."}},
		"fk#0":  {{content: "A-7731"}},
	}
	r := runSession(t, ts, turns, nil)
	if r.res.Status != StatusDone {
		t.Fatalf("status = %s (%v)", r.res.Status, r.res.Err)
	}
	iso, fk := r.childByName(t, "iso"), r.childByName(t, "fk")

	t.Run("isolated: its system prompt, one user message with the description verbatim, 7 tools without task", func(t *testing.T) {
		first := r.model.requestsOf(iso.ID)[0]
		if first.system != "Be brief." {
			t.Fatalf("system = %q", first.system)
		}
		if len(first.messages) != 1 || first.messages[0].Role != RoleUser || first.messages[0].Content != "Report the order number above." || first.messages[0].Kind != KindTask {
			t.Fatalf("messages = %+v", first.messages)
		}
		if got, want := first.tools, []string{"ls", "read_file", "write_file", "edit_file", "delete", "glob", "grep"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("tools = %v, want %v", got, want)
		}
		if first.contains("A-7731") {
			t.Fatal("the isolated child can see the order number")
		}
	})
	t.Run("fork: the parent's messages as a range, without the in-flight call, then preamble and description", func(t *testing.T) {
		calls := r.modelCalls(fk.ID)
		ctx := calls[0].Context
		// The parent had: prompt, write call, result, iso call, receipt, fk call (in flight).
		want := []Range{{AgentID: "main", From: 0, To: 5}, {AgentID: fk.ID, From: 0, To: 1}}
		if !reflect.DeepEqual(ctx, want) {
			t.Fatalf("context = %+v, want %+v", ctx, want)
		}
		first := r.model.requestsOf(fk.ID)[0]
		parent := r.messages("main")
		for i := 0; i < 5; i++ {
			if first.messages[i].ID != parent[i].ID {
				t.Fatalf("message %d = %s, want the parent's %s", i, first.messages[i].ID, parent[i].ID)
			}
		}
		last := first.messages[5]
		if last.Kind != KindForkPreamble || last.Content != ForkPreamble+"Report the order number above." {
			t.Fatalf("opening = %+v", last)
		}
		if !first.contains("A-7731") {
			t.Fatal("the fork child cannot see the order number")
		}
		if calls[0].InheritedTokens == 0 || calls[0].InheritedTokens >= calls[0].MessageTokens {
			t.Fatalf("inherited = %d of %d message tokens", calls[0].InheritedTokens, calls[0].MessageTokens)
		}
	})
	t.Run("fork: 8 tools with task, byte-identical to the parent's", func(t *testing.T) {
		first := r.model.requestsOf(fk.ID)[0]
		parent := r.model.requestsOf("main")[0]
		if len(first.toolDefs) != 8 || !reflect.DeepEqual(first.toolDefs, parent.toolDefs) {
			t.Fatalf("fork tools = %v, want the parent's %v", first.tools, parent.tools)
		}
	})
	t.Run("the receipts show who could see the order number", func(t *testing.T) {
		msgs := r.messages("main")
		if msgs[4].Content != "I cannot see any order number." || msgs[6].Content != "A-7731" {
			t.Fatalf("receipts = %q, %q", msgs[4].Content, msgs[6].Content)
		}
	})

	t.Run("the system prompt is concatenated for a fork, all four combinations", func(t *testing.T) {
		p20 := "Parent prompt here.." // 20 characters
		c11 := "Child text."          // 11 characters
		for _, c := range []struct {
			parent, child, fork, isolated string
		}{
			{p20, "", p20, ""},
			{p20, c11, p20 + "\n\n" + c11, c11},
			{"", c11, c11, c11},
			{"", "", "", ""},
		} {
			ts := TeamSpec{Main: MainSpec{SystemPrompt: c.parent}, Subagents: []Spec{
				{Name: "iso", Description: "d", SystemPrompt: c.child},
				{Name: "fk", Description: "d", SystemPrompt: c.child, Mode: ModeFork},
			}}
			r := runSession(t, ts, map[string][]fakeTurn{
				"main":  {{calls: []ToolCall{task("t", "iso"), task("t", "fk")}}, {content: "ok"}},
				"iso#0": {{content: "x"}}, "fk#0": {{content: "y"}},
			}, nil)
			gotFork := r.model.requestsOf(r.childByName(t, "fk").ID)[0].system
			gotIso := r.model.requestsOf(r.childByName(t, "iso").ID)[0].system
			if gotFork != c.fork || gotIso != c.isolated {
				t.Errorf("parent %d, child %d chars: fork %q (%d), isolated %q; want %q (%d), %q",
					len(c.parent), len(c.child), gotFork, len(gotFork), gotIso, c.fork, len(c.fork), c.isolated)
			}
		}
	})
	t.Run("the default general-purpose prompt tells the child its caller sees only its final message", func(t *testing.T) {
		if !strings.Contains(GeneralPurpose.SystemPrompt, "sees only your final message") {
			t.Fatal(GeneralPurpose.SystemPrompt)
		}
	})
}

func TestSection5Receipt(t *testing.T) {
	t.Run("the parent gains exactly two messages per delegation", func(t *testing.T) {
		r := runSession(t, TeamSpec{}, map[string][]fakeTurn{
			"main": {{calls: []ToolCall{task("compute", "general-purpose")}}, {content: "It is 42."}},
			"general-purpose#0": {
				{content: "I just wrote a file.", calls: []ToolCall{call("write_file", map[string]string{"file_path": "/child.md", "content": "42"})}},
				{content: "The child's final report: the answer is 42."},
			},
		}, nil)
		msgs := r.messages("main")
		var kinds []string
		for _, m := range msgs {
			kinds = append(kinds, string(m.Role)+":"+string(m.Kind))
		}
		want := []string{"user:prompt", "assistant:", "tool:receipt", "assistant:"}
		if !reflect.DeepEqual(kinds, want) {
			t.Fatalf("parent messages = %v, want %v", kinds, want)
		}
		if msgs[2].Content != "The child's final report: the answer is 42." {
			t.Fatalf("receipt = %q", msgs[2].Content)
		}
		if got := len(r.messages(r.childByName(t, "general-purpose").ID)); got != 4 {
			t.Fatalf("child messages = %d, want 4", got)
		}
	})
	t.Run("the receipt walks back past an empty last message", func(t *testing.T) {
		r := runSession(t, TeamSpec{}, map[string][]fakeTurn{
			"main": {{calls: []ToolCall{task("t", "general-purpose")}}, {content: "ok"}},
			"general-purpose#0": {
				{content: "Found it: /x.md line 3.  \n", calls: []ToolCall{call("ls", map[string]string{"path": "/"})}},
				{content: "   "},
			},
		}, nil)
		if got := r.messages("main")[2].Content; got != "Found it: /x.md line 3." {
			t.Fatalf("receipt = %q", got)
		}
	})
	t.Run("no text at all gives an empty receipt", func(t *testing.T) {
		r := runSession(t, TeamSpec{}, map[string][]fakeTurn{
			"main":              {{calls: []ToolCall{task("t", "general-purpose")}}, {content: "ok"}},
			"general-purpose#0": {{content: ""}},
		}, nil)
		if got := r.messages("main")[2]; got.Content != "" || got.IsError {
			t.Fatalf("receipt = %+v", got)
		}
	})
}

func TestSection6WhatCrossesBack(t *testing.T) {
	t.Run("files come back, todos do not", func(t *testing.T) {
		ts := TeamSpec{Main: MainSpec{Tools: append(DefaultTools(), WriteTodosToolName)},
			Subagents: []Spec{{Name: "planner", Description: "d", Tools: []string{"write_file", WriteTodosToolName}}}}
		r := runSession(t, ts, map[string][]fakeTurn{
			"main": {{calls: []ToolCall{task("t", "planner")}}, {content: "ok"}},
			"planner#0": {
				{calls: []ToolCall{
					call("write_file", map[string]string{"file_path": "/child.md", "content": "from the child"}),
					call(WriteTodosToolName, map[string]any{"todos": []Todo{{Content: "step", Status: "pending"}}}),
				}},
				{content: "done"},
			},
		}, nil)
		if got := r.res.Files["/child.md"]; got != "from the child" {
			t.Fatalf("/child.md = %q", got)
		}
		var fin DelegationFinished
		_ = json.Unmarshal(r.ofType(EventDelegationFinished)[0].Data, &fin)
		if !reflect.DeepEqual(fin.Returned, []string{"receipt", "files"}) || !reflect.DeepEqual(fin.HeldBack, []string{"messages", "todos"}) {
			t.Fatalf("returned %v, held back %v", fin.Returned, fin.HeldBack)
		}
	})

	// Two siblings start from the same snapshot: A edits /x, B never touches
	// it, C deletes /gone.
	lostUpdate := func(merge Merge) map[string]string {
		ts := TeamSpec{Main: MainSpec{FilesMerge: merge}}
		r := runSession(t, ts, map[string][]fakeTurn{
			"main":              {{calls: []ToolCall{task("edit x", "general-purpose"), task("write y", "general-purpose"), task("delete gone", "general-purpose")}}, {content: "ok"}},
			"general-purpose#0": {{calls: []ToolCall{call("edit_file", map[string]string{"file_path": "/x.md", "old_string": "v1", "new_string": "v2"})}}, {content: "edited"}},
			"general-purpose#1": {{calls: []ToolCall{call("write_file", map[string]string{"file_path": "/y.md", "content": "y"})}}, {content: "wrote"}},
			"general-purpose#2": {{calls: []ToolCall{call("delete", map[string]string{"file_path": "/gone.md"})}}, {content: "deleted"}},
		}, map[string]string{"/x.md": "v1", "/gone.md": "old"})
		return r.res.Files
	}
	t.Run("delta merge loses nothing between siblings", func(t *testing.T) {
		files := lostUpdate(MergeDelta)
		if files["/x.md"] != "v2" || files["/y.md"] != "y" {
			t.Fatalf("files = %v", files)
		}
		if _, ok := files["/gone.md"]; ok {
			t.Fatal("a deleted file survived")
		}
	})
	t.Run("snapshot merge loses the sibling's edit and keeps the deleted file", func(t *testing.T) {
		files := lostUpdate(MergeSnapshot)
		if files["/x.md"] != "v1" {
			t.Fatalf("/x.md = %q, want the stale v1", files["/x.md"])
		}
		if files["/gone.md"] != "old" {
			t.Fatal("the deleted file did not survive")
		}
	})
	t.Run("write_todos adds langchain's todo section after the prompt, a fork's after its parent's and its own", func(t *testing.T) {
		ts := TeamSpec{Main: MainSpec{SystemPrompt: "Plan.", Tools: append(DefaultTools(), WriteTodosToolName)},
			Subagents: []Spec{{Name: "fk", Description: "d", SystemPrompt: "Briefly.", Mode: ModeFork},
				{Name: "plain", Description: "d", SystemPrompt: "Read.", Tools: []string{"read_file"}},
				{Name: "bare", Description: "d", Tools: []string{WriteTodosToolName}}}}
		r := runSession(t, ts, map[string][]fakeTurn{
			"main":    {{calls: []ToolCall{task("t", "fk"), task("t", "plain"), task("t", "bare")}}, {content: "ok"}},
			"fk#0":    {{content: "x"}},
			"plain#0": {{content: "y"}},
			"bare#0":  {{content: "z"}},
		}, nil)
		section := "\n\n" + TodoSystemPrompt
		for agent, want := range map[string]string{
			"main": "Plan." + section, r.childByName(t, "fk").ID: "Plan.\n\nBriefly." + section,
			r.childByName(t, "plain").ID: "Read.", r.childByName(t, "bare").ID: section,
		} {
			c := r.modelCalls(agent)[0]
			if c.SystemPrompt != want {
				t.Errorf("%s's system prompt = %q, want %q", agent, c.SystemPrompt, want)
			}
			if c.SystemTokens != (wordCounter{}).Count(want) {
				t.Errorf("%s's system tokens = %d, want the section counted (%d)", agent, c.SystemTokens, (wordCounter{}).Count(want))
			}
		}
		if got := mustTeam(t, ts).MainPromptSections(); got != section {
			t.Errorf("MainPromptSections = %q", got)
		}
	})
	t.Run("a fork inherits the parent's todos, an isolated child does not", func(t *testing.T) {
		ts := TeamSpec{Main: MainSpec{Tools: append(DefaultTools(), WriteTodosToolName)},
			Subagents: []Spec{{Name: "fk", Description: "d", Mode: ModeFork}}}
		todo := call(WriteTodosToolName, map[string]any{"todos": []Todo{{Content: "parent item", Status: "pending"}}})
		r := runSession(t, ts, map[string][]fakeTurn{
			"main":              {{calls: []ToolCall{todo}}, {calls: []ToolCall{task("t", "fk"), task("t", "general-purpose")}}, {content: "ok"}},
			"fk#0":              {{content: "x"}},
			"general-purpose#0": {{content: "y"}},
		}, nil)
		// Neither child touched todos: what each holds back is what it started with.
		held := map[string][]string{}
		for _, e := range r.ofType(EventDelegationFinished) {
			var d DelegationFinished
			_ = json.Unmarshal(e.Data, &d)
			held[d.ChildID] = d.HeldBack
		}
		if got := held[r.childByName(t, "fk").ID]; !reflect.DeepEqual(got, []string{"messages", "todos"}) {
			t.Fatalf("fork held back %v, want its inherited todos", got)
		}
		if got := held[r.childByName(t, "general-purpose").ID]; !reflect.DeepEqual(got, []string{"messages"}) {
			t.Fatalf("isolated child held back %v, want no todos", got)
		}
	})
}

func TestSection7Summarization(t *testing.T) {
	ts := TeamSpec{
		Main:      MainSpec{Summarization: Summarization{MaxTokens: 60, KeepMessages: 2}},
		Subagents: []Spec{{Name: "fk", Description: "d", Mode: ModeFork}},
	}
	var mainTurns []fakeTurn
	for i := 0; i < 4; i++ {
		mainTurns = append(mainTurns, fakeTurn{content: fmt.Sprintf("step %d with a few more words to count", i),
			calls: []ToolCall{call("write_file", map[string]string{"file_path": fmt.Sprintf("/n%d.md", i), "content": "secret-" + fmt.Sprint(i)})}})
	}
	mainTurns = append(mainTurns, fakeTurn{calls: []ToolCall{task("what do you see", "fk")}}, fakeTurn{content: "done"})
	// The tool definitions alone are far over 60 words, so every call
	// summarizes when there is something new to fold.
	r := runSession(t, ts, map[string][]fakeTurn{"main": mainTurns, "fk#0": {{content: "seen"}}}, nil)
	if r.res.Status != StatusDone {
		t.Fatalf("status = %s (%v)", r.res.Status, r.res.Err)
	}
	sums := r.ofType(EventSummarization)
	if len(sums) == 0 {
		t.Fatal("no summarization")
	}
	var last Summarized
	_ = json.Unmarshal(sums[len(sums)-1].Data, &last)
	t.Run("the event records cutoff_index, summary_message and file_path", func(t *testing.T) {
		if last.SummaryMessage == nil || last.SummaryMessage.Kind != KindSummary || last.SummaryMessage.Role != RoleUser {
			t.Fatalf("summary message = %+v", last.SummaryMessage)
		}
		if last.FilePath != "/conversation_history/main.md" || r.res.Files[last.FilePath] == "" {
			t.Fatalf("file_path = %q, file = %q", last.FilePath, r.res.Files[last.FilePath])
		}
		if last.CutoffIndex <= 0 {
			t.Fatalf("cutoff_index = %d", last.CutoffIndex)
		}
	})
	t.Run("later calls see the summary and then messages[cutoff:]", func(t *testing.T) {
		calls := r.modelCalls("main")
		lastCall := calls[len(calls)-1]
		if lastCall.Context[0].Len() != 1 {
			t.Fatalf("context = %+v: want the summary's one-message range first", lastCall.Context)
		}
		msgs := r.messages("main")
		if msgs[lastCall.Context[0].From].Kind != KindSummary {
			t.Fatalf("first message of the context is %+v", msgs[lastCall.Context[0].From])
		}
	})
	t.Run("the cut never separates a tool call from its result", func(t *testing.T) {
		msgs := r.messages("main")
		for _, c := range r.modelCalls("main") {
			if c.Purpose != PurposeTurn {
				continue
			}
			seen := map[string]bool{}
			for _, rg := range c.Context {
				for i := rg.From; i < rg.To; i++ {
					m := msgs[i]
					for _, tc := range m.ToolCalls {
						seen[tc.ID] = true
					}
					if m.Role == RoleTool && !seen[m.ToolCallID] {
						t.Fatalf("call %s: result %s without its call", c.ID, m.ID)
					}
				}
			}
		}
	})
	t.Run("a fork after summarization sees [summary] + tail", func(t *testing.T) {
		fk := r.childByName(t, "fk")
		first := r.model.requestsOf(fk.ID)[0]
		if first.messages[0].Kind != KindSummary {
			t.Fatalf("fork's first message = %+v", first.messages[0])
		}
		if first.contains("secret-0") {
			t.Fatal("the fork child sees history its parent lost")
		}
	})
	t.Run("messages are never deleted", func(t *testing.T) {
		msgs := r.messages("main")
		if !strings.Contains(string(msgs[1].ToolCalls[0].Args), "secret-0") {
			t.Fatalf("first call is gone: %+v", msgs[1])
		}
	})
}

func TestSection8Concurrency(t *testing.T) {
	t.Run("task calls of one message run concurrently, results in call order", func(t *testing.T) {
		// Both children must be running at once to pass the barrier; the
		// first one finishes last.
		gate := make(chan struct{})
		var arrivals atomic.Int32
		m := &gateModel{gate: gate, arrivals: &arrivals, n: 2}
		team := mustTeam(t, TeamSpec{})
		var events []Event
		var mu sync.Mutex
		eng := New(Config{Team: team, Model: m, Counter: wordCounter{}, Sink: SinkFunc(func(e Event) {
			mu.Lock()
			_ = e.Encode()
			events = append(events, e)
			mu.Unlock()
		})})
		done := make(chan *Result)
		go func() { done <- eng.Run(context.Background(), "go") }()
		var res *Result
		select {
		case res = <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("children did not run concurrently: the barrier never opened")
		}
		if res.Status != StatusDone {
			t.Fatalf("status = %s (%v)", res.Status, res.Err)
		}
		r := &run{events: events}
		msgs := r.messages("main")
		if msgs[2].Content != "first" || msgs[3].Content != "second" {
			t.Fatalf("receipts = %q, %q: want call order", msgs[2].Content, msgs[3].Content)
		}
	})
	t.Run("max_concurrency caps the children in flight", func(t *testing.T) {
		var inFlight, peak atomic.Int32
		m := ModelFunc(func(ctx context.Context, req *Request) (*Response, error) {
			if req.Caller.Name == "main" {
				if len(req.Messages) == 1 {
					return &Response{ToolCalls: []ToolCall{task("a", "general-purpose"), task("b", "general-purpose"), task("c", "general-purpose")}}, nil
				}
				return &Response{Content: "ok"}, nil
			}
			n := inFlight.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			time.Sleep(20 * time.Millisecond)
			inFlight.Add(-1)
			return &Response{Content: "x"}, nil
		})
		team := mustTeam(t, TeamSpec{Main: MainSpec{MaxConcurrency: 1}})
		res := New(Config{Team: team, Model: m, Counter: wordCounter{}}).Run(context.Background(), "go")
		if res.Status != StatusDone || peak.Load() != 1 {
			t.Fatalf("status %s, peak children in flight = %d, want 1", res.Status, peak.Load())
		}
	})
	t.Run("parallel children are deterministic", func(t *testing.T) {
		turns := map[string][]fakeTurn{
			"main":              {{calls: []ToolCall{task("a", "general-purpose"), task("b", "general-purpose"), task("c", "general-purpose")}}, {content: "ok"}},
			"general-purpose#0": {{content: "alpha", delay: 30 * time.Millisecond}},
			"general-purpose#1": {{content: "beta", delay: 10 * time.Millisecond}},
			"general-purpose#2": {{content: "gamma"}},
		}
		var first []Message
		var firstAgents []string
		for i := 0; i < 5; i++ {
			r := runSession(t, TeamSpec{}, turns, nil)
			var agents []string
			for _, e := range r.ofType(EventAgentStarted) {
				var d AgentStarted
				_ = json.Unmarshal(e.Data, &d)
				agents = append(agents, fmt.Sprintf("%s:%s#%d", d.Agent.ID, d.Agent.Name, d.Agent.Invocation))
			}
			if firstAgents == nil {
				firstAgents = agents
			} else if !reflect.DeepEqual(agents, firstAgents) {
				t.Fatalf("run %d started agents in another order: %v, then %v", i, firstAgents, agents)
			}
			msgs := r.messages("main")
			if first == nil {
				first = msgs
				if msgs[2].Content != "alpha" || msgs[3].Content != "beta" || msgs[4].Content != "gamma" {
					t.Fatalf("receipts out of call order: %q %q %q", msgs[2].Content, msgs[3].Content, msgs[4].Content)
				}
				continue
			}
			if !reflect.DeepEqual(msgs, first) {
				t.Fatalf("run %d differs:\n%+v\n%+v", i, msgs, first)
			}
		}
	})
}

// gateModel makes n children wait for each other: it proves they run at once.
type gateModel struct {
	gate     chan struct{}
	arrivals *atomic.Int32
	n        int32
}

func (g *gateModel) Generate(ctx context.Context, req *Request) (*Response, error) {
	if req.Caller.Name == "main" {
		if len(req.Messages) == 1 {
			return &Response{ToolCalls: []ToolCall{task("one", "general-purpose"), task("two", "general-purpose")}}, nil
		}
		return &Response{Content: "both done"}, nil
	}
	if g.arrivals.Add(1) == g.n {
		close(g.gate)
	}
	select {
	case <-g.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if req.Caller.Invocation == 0 {
		time.Sleep(30 * time.Millisecond) // the first child finishes last
		return &Response{Content: "first"}, nil
	}
	return &Response{Content: "second"}, nil
}

// ModelFunc adapts a function to a Model, for tests.
type ModelFunc func(ctx context.Context, req *Request) (*Response, error)

func (f ModelFunc) Generate(ctx context.Context, req *Request) (*Response, error) { return f(ctx, req) }

func TestSection9FailureStaysInTheChild(t *testing.T) {
	ts := TeamSpec{Subagents: []Spec{
		{Name: "loop", Description: "d", MaxSteps: 2},
		{Name: "bad", Description: "d"},
		{Name: "crash", Description: "d"},
		{Name: "slow", Description: "d", Timeout: 50 * time.Millisecond},
		{Name: "ok", Description: "d"},
	}}
	ls := call("ls", map[string]string{"path": "/"})
	r := runSession(t, ts, map[string][]fakeTurn{
		"main": {{calls: []ToolCall{task("a", "loop"), task("b", "bad"), task("c", "crash"), task("d", "slow"), task("e", "ok")}},
			{content: "carrying on"}},
		"loop#0":  {{calls: []ToolCall{ls}}, {calls: []ToolCall{ls}}, {calls: []ToolCall{ls}}},
		"bad#0":   {{err: errors.New("503 upstream unavailable")}},
		"crash#0": {{panic: "boom"}},
		"slow#0":  {{content: "too late", delay: 5 * time.Second}},
		"ok#0":    {{content: "fine"}},
	}, nil)
	if r.res.Status != StatusDone || r.res.Answer != "carrying on" {
		t.Fatalf("session = %s %q (%v): a child's failure failed the session", r.res.Status, r.res.Answer, r.res.Err)
	}
	msgs := r.messages("main")
	for i, want := range []string{
		"Subagent 'loop' failed: it reached its step limit of 2 model calls before giving a final answer.",
		"Subagent 'bad' failed: model error: 503 upstream unavailable.",
		"Subagent 'crash' failed: internal error: boom.",
		"Subagent 'slow' failed: it ran out of time after 50ms.",
	} {
		got := msgs[2+i]
		if !got.IsError || got.Kind != KindReceipt || !strings.HasPrefix(got.Content, want) {
			t.Errorf("receipt %d = %+v, want an error receipt starting %q", i, got, want)
		}
	}
	if got := msgs[6]; got.IsError || got.Content != "fine" {
		t.Errorf("the sibling's receipt = %+v", got)
	}
	codes := map[string]string{}
	for _, e := range r.events {
		if e.Type == EventAgentFinished {
			d, err := DataAs[AgentFinished](e)
			if err != nil {
				t.Fatal(err)
			}
			codes[e.AgentID] = d.Code
		}
	}
	// a1 "loop" ran out of its own steps; the others failed of no rule of the engine's.
	if codes["a1"] != FinishStepLimit || codes["a2"] != "" || codes["a4"] != "" || codes["main"] != "" {
		t.Errorf("agent.finished codes %v; want step_limit for a1 alone", codes)
	}
	if log := r.log.String(); !strings.Contains(log, "agent panicked") || !strings.Contains(log, "runAgentSafe") {
		t.Errorf("the panic's stack was not logged: %q", log)
	}
	t.Run("the main agent's failure fails the session", func(t *testing.T) {
		r := runSession(t, TeamSpec{}, map[string][]fakeTurn{"main": {{err: errors.New("bad key")}}}, nil)
		if r.res.Status != StatusFailed || !strings.Contains(r.res.Err.Error(), "bad key") {
			t.Fatalf("status = %s, err = %v", r.res.Status, r.res.Err)
		}
		if got := r.events[len(r.events)-1]; got.Type != EventSessionFinished {
			t.Fatalf("last event = %s", got.Type)
		}
	})
}

func TestSection10StructuredResponses(t *testing.T) {
	findings := `{"title":"Findings","type":"object","properties":{"findings":{"type":"string"},"confidence":{"type":"number"}},"required":["findings","confidence"]}`
	ts := TeamSpec{Subagents: []Spec{{Name: "analyst", Description: "d", ResponseFormat: json.RawMessage(findings)}}}
	r := runSession(t, ts, map[string][]fakeTurn{
		"main": {{calls: []ToolCall{task("analyse", "analyst")}}, {content: "ok"}},
		"analyst#0": {
			{calls: []ToolCall{{Name: "Findings", Args: json.RawMessage(`{"findings":"3 leads","confidence":"high"}`)}}},
			{calls: []ToolCall{{Name: "Findings", Args: json.RawMessage(`{"findings": "3 leads", "confidence": 0.82}`)}}},
		},
	}, nil)
	child := r.childByName(t, "analyst")
	t.Run("the child gets one more tool, named after the title", func(t *testing.T) {
		first := r.model.requestsOf(child.ID)[0]
		if got := first.tools; len(got) != 8 || got[7] != "Findings" {
			t.Fatalf("tools = %v", got)
		}
	})
	t.Run("arguments that do not validate come back naming the field", func(t *testing.T) {
		msgs := r.messages(child.ID)
		if !msgs[2].IsError || !strings.Contains(msgs[2].Content, "/confidence") {
			t.Fatalf("result = %+v", msgs[2])
		}
	})
	t.Run("a valid call ends the child; the receipt is the compact JSON", func(t *testing.T) {
		got := r.messages("main")[2]
		if got.Content != `{"findings":"3 leads","confidence":0.82}` || got.IsError {
			t.Fatalf("receipt = %+v", got)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(got.Content), &v); err != nil {
			t.Fatalf("receipt is not JSON: %v", err)
		}
		var fin DelegationFinished
		_ = json.Unmarshal(r.ofType(EventDelegationFinished)[0].Data, &fin)
		if !reflect.DeepEqual(fin.HeldBack, []string{"messages", "structured_response"}) {
			t.Fatalf("held back = %v", fin.HeldBack)
		}
	})
	t.Run("a child that keeps giving invalid answers fails after retries", func(t *testing.T) {
		bad := ToolCall{Name: "Findings", Args: json.RawMessage(`{"findings":"x"}`)}
		r := runSession(t, ts, map[string][]fakeTurn{
			"main":      {{calls: []ToolCall{task("analyse", "analyst")}}, {content: "ok"}},
			"analyst#0": {{calls: []ToolCall{bad}}, {calls: []ToolCall{bad}}, {calls: []ToolCall{bad}}, {content: "never played"}},
		}, nil)
		if got := r.messages("main")[2]; !got.IsError || !strings.Contains(got.Content, "no valid structured answer after 3 attempts") {
			t.Fatalf("receipt = %+v", got)
		}
	})
}

func TestSection11Tokens(t *testing.T) {
	r := runSession(t, TeamSpec{Main: MainSpec{SystemPrompt: "three word prompt"}}, map[string][]fakeTurn{
		"main":              {{content: "one two", calls: []ToolCall{task("four words of task", "general-purpose")}}, {content: "ok"}},
		"general-purpose#0": {{content: "done"}},
	}, nil)
	for _, c := range append(r.modelCalls("main"), r.modelCalls(r.childByName(t, "general-purpose").ID)...) {
		tools := 0
		for _, tc := range c.Tools {
			tools += tc.Tokens
		}
		if tools != c.ToolTokens || c.InputTokens != c.SystemTokens+c.ToolTokens+c.MessageTokens {
			t.Fatalf("call %s: %d system + %d tools + %d messages != %d input", c.ID, c.SystemTokens, c.ToolTokens, c.MessageTokens, c.InputTokens)
		}
	}
	first := r.modelCalls("main")[0]
	if first.SystemTokens != 3 || first.MessageTokens != 3 { // "the user's question"
		t.Fatalf("first call: system %d, messages %d", first.SystemTokens, first.MessageTokens)
	}
	child := r.modelCalls(r.childByName(t, "general-purpose").ID)[0]
	if child.MessageTokens != 4 || child.InheritedTokens != 0 {
		t.Fatalf("isolated child's first call: messages %d, inherited %d", child.MessageTokens, child.InheritedTokens)
	}
}

func TestEventLog(t *testing.T) {
	r := runSession(t, TeamSpec{}, map[string][]fakeTurn{
		"main":              {{calls: []ToolCall{task("t", "general-purpose")}}, {content: "ok"}},
		"general-purpose#0": {{content: "done"}},
	}, nil)
	t.Run("seq counts from 1 without gaps", func(t *testing.T) {
		for i, e := range r.events {
			if e.Seq != int64(i+1) {
				t.Fatalf("event %d has seq %d", i, e.Seq)
			}
		}
	})
	t.Run("it starts and ends with the session", func(t *testing.T) {
		if r.events[0].Type != EventSessionStarted || r.events[len(r.events)-1].Type != EventSessionFinished {
			t.Fatalf("first %s, last %s", r.events[0].Type, r.events[len(r.events)-1].Type)
		}
	})
	t.Run("model.started comes before the model's message", func(t *testing.T) {
		var order []EventType
		for _, e := range r.events {
			if e.AgentID == "main" && (e.Type == EventModelStarted || e.Type == EventModelFinished || e.Type == EventDelegationStarted || e.Type == EventDelegationFinished) {
				order = append(order, e.Type)
			}
		}
		want := []EventType{EventModelStarted, EventModelFinished, EventDelegationStarted, EventDelegationFinished, EventModelStarted, EventModelFinished}
		if !reflect.DeepEqual(order, want) {
			t.Fatalf("order = %v, want %v", order, want)
		}
	})
	t.Run("a session event's agent_id is null in JSON", func(t *testing.T) {
		b, _ := json.Marshal(r.events[0])
		if !strings.Contains(string(b), `"data":{`) {
			t.Fatalf("json = %s: the payload was not encoded", b)
		}
		if !strings.Contains(string(b), `"agent_id":null`) {
			t.Fatalf("json = %s", b)
		}
		var back Event
		if err := json.Unmarshal(b, &back); err != nil || back.AgentID != "" || back.Seq != 1 {
			t.Fatalf("round trip = %+v, %v", back, err)
		}
	})
}

func TestNestedDelegationIsRefused(t *testing.T) {
	ts := TeamSpec{Subagents: []Spec{{Name: "fk", Description: "d", Mode: ModeFork}}}
	r := runSession(t, ts, map[string][]fakeTurn{
		"main":              {{calls: []ToolCall{task("do it", "fk"), task("do it too", "general-purpose")}}, {content: "ok"}},
		"fk#0":              {{calls: []ToolCall{task("deeper", "general-purpose")}}, {content: "did it myself"}},
		"general-purpose#0": {{calls: []ToolCall{task("deeper", "general-purpose")}}, {content: "no task tool here"}},
	}, nil)
	fk, gp := r.childByName(t, "fk"), r.childByName(t, "general-purpose")
	t.Run("the fork child gets the exact refusal and carries on", func(t *testing.T) {
		msgs := r.messages(fk.ID)
		if got := msgs[2]; got.Content != NestedRefusal || got.Kind != KindRefusal {
			t.Fatalf("result = %+v", got)
		}
		if got := r.messages("main")[2].Content; got != "did it myself" {
			t.Fatalf("receipt = %q", got)
		}
		var d DelegationRefused
		_ = json.Unmarshal(r.ofType(EventDelegationRefused)[0].Data, &d)
		if d.Reason != RefusedNested || r.ofType(EventDelegationRefused)[0].AgentID != fk.ID {
			t.Fatalf("refused event = %+v", d)
		}
	})
	t.Run("the isolated child has no task tool at all", func(t *testing.T) {
		msgs := r.messages(gp.ID)
		if got := msgs[2]; !got.IsError || !strings.HasPrefix(got.Content, "Unknown tool 'task'") {
			t.Fatalf("result = %+v", got)
		}
		if len(r.ofType(EventDelegationRefused)) != 1 {
			t.Fatal("the isolated child's attempt left a refusal event: it should have no trace but its own error")
		}
	})
	t.Run("the parent never learns of the attempt", func(t *testing.T) {
		for _, m := range r.messages("main") {
			if strings.Contains(m.Content, "cannot delegate") || strings.Contains(m.Content, "deeper") {
				t.Fatalf("the parent holds %+v", m)
			}
		}
		if n := len(r.ofType(EventAgentStarted)); n != 3 {
			t.Fatalf("agents started = %d, want 3: no grandchild", n)
		}
	})
}

// TestEntryCost is the second article's §4: an isolated child's first call
// costs the same whatever the parent did; a fork child's grows with it.
func TestEntryCost(t *testing.T) {
	ts := TeamSpec{Subagents: []Spec{{Name: "iso", Description: "d"}, {Name: "fk", Description: "d", Mode: ModeFork}}}
	entry := func(steps int) (iso, fork int) {
		var turns []fakeTurn
		for i := 0; i < steps; i++ {
			turns = append(turns, fakeTurn{calls: []ToolCall{call("write_file", map[string]string{
				"file_path": fmt.Sprintf("/f%d.md", i), "content": "some words written by the parent"})}})
		}
		turns = append(turns, fakeTurn{calls: []ToolCall{task("report the order number", "iso"), task("report the order number", "fk")}}, fakeTurn{content: "ok"})
		r := runSession(t, ts, map[string][]fakeTurn{"main": turns, "iso#0": {{content: "x"}}, "fk#0": {{content: "y"}}}, nil)
		return r.modelCalls(r.childByName(t, "iso").ID)[0].MessageTokens, r.modelCalls(r.childByName(t, "fk").ID)[0].MessageTokens
	}
	iso1, fork1 := entry(1)
	iso4, fork4 := entry(4)
	iso8, fork8 := entry(8)
	if iso1 != iso4 || iso4 != iso8 {
		t.Fatalf("isolated entry = %d, %d, %d: want constant", iso1, iso4, iso8)
	}
	// Each parent step adds the same messages, so each step costs the fork
	// the same: linear growth.
	perStep := (fork4 - fork1) / 3
	if perStep <= 0 || fork4-fork1 != 3*perStep || fork8-fork4 != 4*perStep {
		t.Fatalf("fork entry = %d, %d, %d: want linear growth", fork1, fork4, fork8)
	}
}

// TestSection7HistoryPath: the folded history goes to the agent's own file,
// /conversation_history/<agent id>.md; under compat to deepagents JS's
// /conversation_history/session_<8 hex digits>.md, one per agent (a child
// its own, as each task call's child gets one), the same from run to run,
// and the summary message names it.
func TestSection7HistoryPath(t *testing.T) {
	summaryPaths := func(t *testing.T, compat Compat) map[string]string {
		t.Helper()
		sum := Summarization{MaxTokens: 60, KeepMessages: 2}
		ts := TeamSpec{
			Main:      MainSpec{Compat: compat, Summarization: sum},
			Subagents: []Spec{{Name: "iso", Description: "d", Summarization: sum}},
		}
		steps := func(n int) []fakeTurn {
			var turns []fakeTurn
			for i := 0; i < n; i++ {
				turns = append(turns, fakeTurn{content: fmt.Sprintf("step %d", i),
					calls: []ToolCall{call("write_file", map[string]string{"file_path": fmt.Sprintf("/n%d.md", i), "content": "x"})}})
			}
			return turns
		}
		r := runSession(t, ts, map[string][]fakeTurn{
			"main":  append(steps(3), fakeTurn{calls: []ToolCall{task("go", "iso")}}, fakeTurn{content: "done"}),
			"iso#0": append(steps(3), fakeTurn{content: "seen"}),
		}, nil)
		if r.res.Status != StatusDone {
			t.Fatalf("status = %s (%v)", r.res.Status, r.res.Err)
		}
		paths := map[string]string{}
		for _, e := range r.ofType(EventSummarization) {
			var s Summarized
			_ = json.Unmarshal(e.Data, &s)
			if old, ok := paths[e.AgentID]; ok && old != s.FilePath {
				t.Fatalf("%s summarized to %s, then to %s", e.AgentID, old, s.FilePath)
			}
			paths[e.AgentID] = s.FilePath
			if r.res.Files[s.FilePath] == "" && e.AgentID == "main" {
				t.Errorf("%s: no file at %s", e.AgentID, s.FilePath)
			}
			if !strings.Contains(s.SummaryMessage.Content, s.FilePath) {
				t.Errorf("%s: the summary message does not name %s: %q", e.AgentID, s.FilePath, s.SummaryMessage.Content)
			}
			if !IsHistoryPath(s.FilePath) {
				t.Errorf("IsHistoryPath(%q) = false", s.FilePath)
			}
		}
		iso := r.childByName(t, "iso").ID
		if paths["main"] == "" || paths[iso] == "" {
			t.Fatalf("summarized: %v; want main and %s", paths, iso)
		}
		return map[string]string{"main": paths["main"], "child": paths[iso], "childID": iso}
	}
	t.Run("ours names the agent", func(t *testing.T) {
		p := summaryPaths(t, CompatNone)
		if p["main"] != "/conversation_history/main.md" || p["child"] != "/conversation_history/"+p["childID"]+".md" {
			t.Fatalf("paths = %v", p)
		}
	})
	t.Run("compat: deepagents' session_<8 hex>.md, one per agent, repeatable", func(t *testing.T) {
		p := summaryPaths(t, CompatDeepagents)
		shape := regexp.MustCompile(`^/conversation_history/session_[0-9a-f]{8}\.md$`)
		if !shape.MatchString(p["main"]) || !shape.MatchString(p["child"]) || p["main"] == p["child"] {
			t.Fatalf("paths = %v", p)
		}
		if p["main"] != HistoryPath(CompatDeepagents, "s1", "main") {
			t.Fatalf("main's path %s is not HistoryPath's", p["main"])
		}
		if again := summaryPaths(t, CompatDeepagents); again["main"] != p["main"] || again["child"] != p["child"] {
			t.Fatalf("a second run wrote %v, the first %v", again, p)
		}
	})
}
