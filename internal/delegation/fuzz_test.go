package delegation

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
)

// FuzzToolArgs runs every tool of the stack on arbitrary arguments: a tool
// answers or returns an error the model can act on, never panics, and never
// writes outside absolute paths without "..".
func FuzzToolArgs(f *testing.F) {
	f.Add("read_file", `{"file_path":"/a.md","offset":-1,"limit":0}`)
	f.Add("write_file", `{"file_path":"/../etc/passwd","content":"x"}`)
	f.Add("edit_file", `{"file_path":"/a.md","old_string":"","new_string":"y","replace_all":true}`)
	f.Add("glob", `{"pattern":"[","path":"/"}`)
	f.Add("grep", `{"pattern":"a","glob":"**/[!a].md","output_mode":"content","max_count":-3}`)
	f.Add("write_todos", `{"todos":[{"content":"","status":"done"}]}`)
	f.Add("ls", `[]`)
	f.Fuzz(func(t *testing.T, name, args string) {
		tl := stackTool(name)
		if tl == nil {
			tl = stack[len(name)%len(stack)]
		}
		w := newWorkspace(map[string]string{"/a.md": "one\ntwo", "/d/b.md": "two"})
		out, err := tl.run(context.Background(), w, json.RawMessage(args))
		if err != nil {
			var te *toolError
			if !errors.As(err, &te) || te.msg == "" {
				t.Fatalf("%s(%s): %T %v: want a tool error with a message", tl.def.Name, args, err, err)
			}
			return
		}
		_ = out
		for p := range w.files {
			if _, err := cleanPath(p); err != nil || p[0] != '/' {
				t.Fatalf("%s(%s) wrote %q", tl.def.Name, args, p)
			}
		}
	})
}
