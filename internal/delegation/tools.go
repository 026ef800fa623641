package delegation

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Tool names of the default stack (delegation.md §1).
const (
	TaskToolName       = "task"
	WriteTodosToolName = "write_todos"
)

// tool is a tool definition and, for the stack's tools, what it does. The
// task tool and a structured-response tool have no run: the engine handles
// them, because they end or start agents.
type tool struct {
	def ToolDef
	run func(w *workspace, args json.RawMessage) (string, error)
}

// toolError is a tool failure the model can act on: it becomes a tool result
// with is_error set, never a crash.
type toolError struct{ msg string }

func (e *toolError) Error() string { return e.msg }

func toolErrorf(format string, args ...any) error {
	return &toolError{msg: fmt.Sprintf(format, args...)}
}

func defs(tools []*tool) []ToolDef {
	out := make([]ToolDef, len(tools))
	for i, t := range tools {
		out[i] = t.def
	}
	return out
}

// schema builds a JSON Schema for an object from property definitions, in
// order, so tool definitions serialize the same way every time.
func schema(required []string, props ...string) json.RawMessage {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	for i := 0; i+1 < len(props); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:%s", props[i], props[i+1])
	}
	b.WriteString(`},"required":[`)
	for i, r := range required {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q", r)
	}
	b.WriteString(`],"additionalProperties":false}`)
	return json.RawMessage(b.String())
}

func prop(typ, desc string) string {
	d, _ := json.Marshal(desc)
	return fmt.Sprintf(`{"type":%q,"description":%s}`, typ, d)
}

var stack = []*tool{
	{def: ToolDef{Name: "ls",
		Description: "List the files and directories directly under a directory of the shared virtual filesystem. " +
			"Use it to see what exists before you read or write. Directories end with '/'.",
		Parameters: schema([]string{"path"}, "path", prop("string", "Absolute path of the directory, e.g. / or /docs."))},
		run: runLS},
	{def: ToolDef{Name: "read_file",
		Description: "Read a file of the virtual filesystem. Lines come numbered like `cat -n`, starting at 1. " +
			"Long files are read a page at a time: by default the first 100 lines; use offset and limit for the rest. " +
			"Read a file before you edit it.",
		Parameters: schema([]string{"file_path"},
			"file_path", prop("string", "Absolute path of the file, e.g. /notes.md."),
			"offset", prop("integer", "Line to start from, counting from 0. Default 0."),
			"limit", prop("integer", "Number of lines to read. Default 100."))},
		run: runReadFile},
	{def: ToolDef{Name: "write_file",
		Description: "Create a new file in the virtual filesystem with the given content. " +
			"It refuses to overwrite a file that exists: use edit_file to change one.",
		Parameters: schema([]string{"file_path", "content"},
			"file_path", prop("string", "Absolute path of the new file."),
			"content", prop("string", "The whole content of the file."))},
		run: runWriteFile},
	{def: ToolDef{Name: "edit_file",
		Description: "Replace text in a file: old_string must match the file exactly once (give more surrounding text " +
			"if it does not), unless replace_all is true. Read the file first so old_string is exact, indentation included.",
		Parameters: schema([]string{"file_path", "old_string", "new_string"},
			"file_path", prop("string", "Absolute path of the file."),
			"old_string", prop("string", "The exact text to replace."),
			"new_string", prop("string", "The text to put in its place."),
			"replace_all", prop("boolean", "Replace every occurrence. Default false."))},
		run: runEditFile},
	{def: ToolDef{Name: "delete",
		Description: "Delete a file from the virtual filesystem.",
		Parameters:  schema([]string{"file_path"}, "file_path", prop("string", "Absolute path of the file to delete."))},
		run: runDelete},
	{def: ToolDef{Name: "glob",
		Description: "Find files by name with a glob pattern: * matches within one path segment, ** across segments, " +
			"? one character. Returns matching paths, sorted. Example: **/*.md under /docs.",
		Parameters: schema([]string{"pattern"},
			"pattern", prop("string", "The glob pattern, relative to path."),
			"path", prop("string", "Directory to search from. Default /."))},
		run: runGlob},
	{def: ToolDef{Name: "grep",
		Description: "Search file contents for literal text (not a regular expression). By default it lists the files " +
			"that contain it; output_mode 'content' shows matching lines as path:line:text, and 'count' the number of " +
			"matches per file. Narrow the search with path (a directory) and glob (a file-name pattern).",
		Parameters: schema([]string{"pattern"},
			"pattern", prop("string", "The literal text to search for."),
			"path", prop("string", "Directory to search in. Default /."),
			"glob", prop("string", "Only search files whose path matches this glob, e.g. *.py."),
			"output_mode", `{"type":"string","enum":["files_with_matches","content","count"],"description":"files_with_matches (default), content or count."}`,
			"max_count", prop("integer", "Stop after this many matching lines per file."))},
		run: runGrep},
	{def: ToolDef{Name: WriteTodosToolName,
		Description: "Replace your todo list, to plan a multi-step task and track it. Each item has content and a " +
			"status: pending, in_progress or completed. Keep exactly one item in_progress while you work.",
		Parameters: schema([]string{"todos"},
			"todos", `{"type":"array","description":"The whole list, in order.","items":{"type":"object","properties":{"content":{"type":"string"},"status":{"type":"string","enum":["pending","in_progress","completed"]}},"required":["content","status"]}}`)},
		run: runWriteTodos},
}

// defaultToolNames is the main agent's stack: the seven filesystem tools and
// task. write_todos is opt-in.
var defaultToolNames = []string{"ls", "read_file", "write_file", "edit_file", "delete", "glob", "grep", TaskToolName}

// DefaultTools returns the default stack's names, in order.
func DefaultTools() []string { return append([]string(nil), defaultToolNames...) }

// StackToolNames returns every tool name a spec may list besides task.
func StackToolNames() []string {
	names := make([]string, len(stack))
	for i, t := range stack {
		names[i] = t.def.Name
	}
	return names
}

func stackTool(name string) *tool {
	for _, t := range stack {
		if t.def.Name == name {
			return t
		}
	}
	return nil
}

// decodeArgs reads a tool's arguments into v, turning decoding failures into
// errors that name the argument, for the model to fix.
func decodeArgs(toolName string, args json.RawMessage, v any) error {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if err := json.Unmarshal(args, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return toolErrorf("Invalid arguments for %s: %s must be %s, not %s.", toolName, te.Field, article(te.Type.Kind().String()), te.Value)
		}
		return toolErrorf("Invalid arguments for %s: they must be a JSON object (%v).", toolName, err)
	}
	return nil
}

func article(kind string) string {
	switch kind {
	case "int", "int64":
		return "an integer"
	case "bool":
		return "a boolean"
	case "string":
		return "a string"
	case "slice":
		return "a list"
	}
	return "a " + kind
}

func required(toolName string, pairs ...string) error {
	var missing []string
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			missing = append(missing, pairs[i])
		}
	}
	if len(missing) > 0 {
		return toolErrorf("Invalid arguments for %s: missing %s.", toolName, strings.Join(missing, ", "))
	}
	return nil
}
