package delegation

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// runPrompt runs a session on the fake model with the given prompt.
func runPrompt(t *testing.T, ts TeamSpec, turns map[string][]fakeTurn, files map[string]string, prompt string) *run {
	t.Helper()
	m := &fakeModel{turns: turns}
	r := &run{model: m}
	var mu sync.Mutex
	eng := New(Config{SessionID: "s1", Team: mustTeam(t, ts), Model: m, Counter: wordCounter{}, Files: files,
		Sink: SinkFunc(func(e Event) {
			mu.Lock()
			defer mu.Unlock()
			if e.Seq > 0 {
				if err := e.Encode(); err != nil {
					panic(err)
				}
				r.events = append(r.events, e)
			}
		})})
	r.res = eng.Run(context.Background(), prompt)
	if r.res.Status != StatusDone {
		t.Fatalf("session %s: %v", r.res.Status, r.res.Err)
	}
	return r
}

// longLines is a file of n lines of width characters, each starting with
// its number, so a cut shows which line it fell on.
func longLines(n, width int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%04d%s\n", i+1, strings.Repeat("x", width-4))
	}
	return b.String()
}

func readOnce(t *testing.T, files map[string]string, args map[string]any) string {
	t.Helper()
	r := runPrompt(t, TeamSpec{}, map[string][]fakeTurn{
		"main": {{calls: []ToolCall{call("read_file", args)}}, {content: "done"}},
	}, files, "read it")
	res := r.messages("main")[2]
	if res.Role != RoleTool || res.Evicted != nil {
		t.Fatalf("read_file result = %+v: a read is cut, never evicted", res)
	}
	return res.Content
}

func TestSection12ReadFileCutsItsOutputAsDeepagents(t *testing.T) {
	t.Run("a window under 80,000 characters is whole", func(t *testing.T) {
		got := readOnce(t, map[string]string{"/f.txt": longLines(50, 1500)}, map[string]any{"file_path": "/f.txt"})
		if strings.Contains(got, "[Output was truncated") || strings.Count(got, "\n") != 49 {
			t.Fatalf("a 75,050-character file was cut: %.200q", got)
		}
	})
	t.Run("a bigger window ends at the last whole line that fits, under the notice", func(t *testing.T) {
		// 100 lines of 1,510 characters (151,100 with newlines): deepagents'
		// notice is 321 characters here, its header 64, so lines 1-52 fit in
		// 80,000 (321+1+64+1+52×1,511-1 = 78,958) and line 53 does not.
		got := readOnce(t, map[string]string{"/big.txt": longLines(100, 1510)}, map[string]any{"file_path": "/big.txt"})
		notice := strings.ReplaceAll(ReadFileTruncationMsg, "{file_path}", "/big.txt")
		if !strings.HasPrefix(got, notice+"\n") {
			t.Fatalf("no notice: %.300q", got)
		}
		if !strings.Contains(got, "    52\t0052") || strings.Contains(got, "    53\t0053") {
			t.Fatalf("cut on the wrong line: %q", got[len(got)-200:])
		}
		if !strings.HasSuffix(got, "(48 more lines; read on with offset 52)") {
			t.Fatalf("the resume offset must follow the last line shown: %q", got[len(got)-80:])
		}
	})
	t.Run("a single line too long to fit is cut inside it", func(t *testing.T) {
		got := readOnce(t, map[string]string{"/one.json": strings.Repeat("y", 151089)}, map[string]any{"file_path": "/one.json"})
		notice := strings.ReplaceAll(ReadFileTruncationMsg, "{file_path}", "/one.json")
		shown := strings.Count(strings.TrimPrefix(got, notice), "y")
		// deepagents: notice, "\n", "@@ lines 1-1 of 1 | truncated mid-line | N of 151089 chars @@", "\n", N characters.
		want := ReadFileMaxChars - len(notice) - 1 - len("@@ lines 1-1 of 1 | truncated mid-line | 151089 of 151089 chars @@") - 1
		if !strings.HasPrefix(got, notice+"\n") || shown != want {
			t.Fatalf("showed %d characters of the line, want %d", shown, want)
		}
	})
	t.Run("sizes are JavaScript's: UTF-16 code units", func(t *testing.T) {
		// 45,000 'é' are 90,000 bytes but 45,000 units: whole in deepagents.
		got := readOnce(t, map[string]string{"/fr.txt": strings.Repeat("é", 45000)}, map[string]any{"file_path": "/fr.txt"})
		if strings.Contains(got, "[Output was truncated") {
			t.Fatal("cut by bytes, not by UTF-16 units")
		}
		// 25,000 '😀' are 50,000 units plus 35,000: cut.
		got = readOnce(t, map[string]string{"/emoji.txt": strings.Repeat("😀", 25000) + strings.Repeat("z", 35000)}, map[string]any{"file_path": "/emoji.txt"})
		if !strings.Contains(got, "[Output was truncated") {
			t.Fatal("85,000 UTF-16 units were not cut")
		}
	})
}

func TestSection12BigToolResultIsEvicted(t *testing.T) {
	receiptOf := func(t *testing.T, answer string) (*run, Message) {
		t.Helper()
		tc := task("write it all", "general-purpose")
		tc.ID = "call.big/1"
		r := runPrompt(t, TeamSpec{}, map[string][]fakeTurn{
			"main":              {{calls: []ToolCall{tc}}, {content: "done"}},
			"general-purpose#0": {{content: answer}},
		}, nil, "go")
		return r, r.messages("main")[2]
	}
	t.Run("a receipt over 80,000 characters becomes a file and a pointer", func(t *testing.T) {
		answer := strings.Repeat("word ", 16000) + "\nlast line" // 80,010 characters
		r, m := receiptOf(t, answer)
		const path = "/large_tool_results/call_big_1.txt"
		if m.Evicted == nil || m.Evicted.Path != path || m.Evicted.Chars != len(answer) || m.Evicted.Tokens != 16002 {
			t.Fatalf("evicted = %+v", m.Evicted)
		}
		want := "Tool result too large, the result of this tool call call.big/1 was saved in the filesystem at this path: " + path + "\n"
		if !strings.HasPrefix(m.Content, want) || !strings.HasSuffix(m.Content, "     1\t"+strings.Repeat("word ", 200)+"\n     2\tlast line") {
			t.Fatalf("pointer = %q", m.Content)
		}
		if m.Tokens >= 16002/10 || m.Kind != KindReceipt {
			t.Fatalf("the pointer is %d tokens, kind %q", m.Tokens, m.Kind)
		}
		if got := r.res.Files[path]; got != answer {
			t.Fatalf("the file holds %d characters, want the receipt's %d", len(got), len(answer))
		}
		// The next call reads the pointer.
		last := r.model.requestsOf("main")[1]
		if !last.contains("Tool result too large") || last.contains(strings.Repeat("word ", 300)) {
			t.Fatal("the parent's next call did not read the pointer")
		}
	})
	t.Run("80,000 characters stay", func(t *testing.T) {
		_, m := receiptOf(t, strings.Repeat("word ", 16000))
		if m.Evicted != nil || len(m.Content) != 79999 { // rstripped
			t.Fatalf("evicted at the limit: %+v", m.Evicted)
		}
	})
}

func TestSection12BigPromptIsEvicted(t *testing.T) {
	prompt := strings.Repeat("line of the prompt\n", 13158) + "the question" // 250,014 characters
	r := runPrompt(t, TeamSpec{Subagents: []Spec{{Name: "f", Description: "d", Mode: ModeFork}}}, map[string][]fakeTurn{
		"main": {{calls: []ToolCall{task("look", "f")}}, {content: "done"}},
		"f#0":  {{content: "seen"}},
	}, nil, prompt)
	m := r.messages("main")[0]
	if m.Evicted == nil || !strings.HasPrefix(m.Evicted.Path, "/conversation_history/") || len(m.Evicted.Path) != len("/conversation_history/")+12 {
		t.Fatalf("evicted = %+v", m.Evicted)
	}
	want := "Message content too large and was saved to the filesystem at: " + m.Evicted.Path + "\n\n" +
		"You can read the full content using the read_file tool with pagination (offset and limit parameters).\n\n" +
		"Here is a preview showing the head and tail of the content:\n\n" +
		"     1\tline of the prompt\n" + strings.Repeat("", 0)
	if !strings.HasPrefix(m.Content, want) || !strings.Contains(m.Content, "\n... [13149 lines truncated] ...\n") ||
		!strings.HasSuffix(m.Content, " 13159\tthe question") {
		t.Fatalf("pointer = %q", m.Content)
	}
	if r.res.Files[m.Evicted.Path] != prompt {
		t.Fatal("the file does not hold the prompt")
	}
	for _, id := range []string{"main", r.childByName(t, "f").ID} {
		first := r.model.requestsOf(id)[0]
		if first.contains("line of the prompt\nline of the prompt\nline of the prompt\nline of the prompt\nline of the prompt\nline") {
			t.Fatalf("%s's first call read the whole prompt", id)
		}
		if !first.contains("Message content too large") {
			t.Fatalf("%s's first call did not read the pointer", id)
		}
	}
	if calls := r.modelCalls("main"); calls[0].MessageTokens != m.Tokens || m.Tokens > 300 {
		t.Fatalf("main's first call counted %d message tokens, the pointer is %d", calls[0].MessageTokens, m.Tokens)
	}
	t.Run("200,000 characters stay", func(t *testing.T) {
		r := runPrompt(t, TeamSpec{}, map[string][]fakeTurn{"main": {{content: "ok"}}}, nil, strings.Repeat("x", 200000))
		if m := r.messages("main")[0]; m.Evicted != nil || len(m.Content) != 200000 {
			t.Fatal("evicted at the limit")
		}
	})
}

func TestJSReplaceAndPreview(t *testing.T) {
	if got := jsReplace("a {x} b {x}", "{x}", "$$-$&-$`-$'"); got != "a $-{x}-a - b {x} b {x}" {
		t.Fatalf("jsReplace = %q", got)
	}
	if got := contentPreview("a\nb"); got != "     1\ta\n     2\tb" {
		t.Fatalf("preview = %q", got)
	}
	if got := jsPrefix("😀😀", 3); got != "😀" {
		t.Fatalf("jsPrefix = %q", got)
	}
}
