package delegation

import (
	"context"
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
	run func(ctx context.Context, w *workspace, args json.RawMessage) (string, error)
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
		b.WriteString(jsonString(props[i]) + ":" + props[i+1])
	}
	b.WriteString(`},"required":[`)
	for i, r := range required {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(jsonString(r))
	}
	b.WriteString(`],"additionalProperties":false}`)
	return json.RawMessage(b.String())
}

func prop(typ, desc string) string {
	return `{"type":` + jsonString(typ) + `,"description":` + jsonString(desc) + `}`
}

// jsonString is s as a JSON string (Go's %q is not JSON: it writes \x00
// and \a, which JSON has not).
func jsonString(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
}

// stack is the default stack's tools (delegation.md §1). Their texts are
// ours, each saying what deepagents' says for the same tool
// (middleware/filesystem.py:1100-1305: the input schemas and the
// *_TOOL_DESCRIPTION texts) about tools that work as ours do, at the size
// of deepagents' definitions as JSON (ToolJSON): ls 466 characters,
// read_file 1,777, write_file 735, edit_file 1,094, delete 636, glob 1,633,
// grep 2,301.
var stack = []*tool{
	{def: ToolDef{Name: "ls",
		Description: "Lists the files and directories directly under one directory; directory names end with '/'.\n\n" +
			"Use it to explore the filesystem and find the file to read or edit, before using read_file or edit_file.",
		Parameters: schema([]string{"path"}, "path", prop("string", "Absolute path of the directory to list, e.g. / or /docs."))},
		run: runLS},
	{def: ToolDef{Name: "read_file",
		Description: "Reads a file of the virtual filesystem. Any path the user gives you may be tried: a file that does not exist returns an error.\n\n" +
			"Usage:\n" +
			"- By default it reads up to 100 lines from the top of the file. Use offset and limit to page through a long file instead of reading it whole.\n" +
			"- Lines come numbered like `cat -n`: the line number, right-aligned in six columns, then a tab, then the line; the first line is 1. " +
			"The numbers are not part of the file: never copy them into old_string or new_string.\n" +
			"- When more lines follow the page you read, the result ends with a note saying how many, and which offset reads on.\n" +
			"- An empty file returns a note saying that it exists and is empty, in place of its contents.\n" +
			"- When several files may be useful, read them in one response: several read_file calls in the same message.\n" +
			"- The filesystem is shared with your subagents: a file that a subagent wrote is there for you to read once its report is back.\n" +
			"- A path naming a directory is an error: list it with ls.\n" +
			"- Always read a file before you edit it, so that old_string is copied exactly.",
		Parameters: schema([]string{"file_path"},
			"file_path", prop("string", "Absolute path of the file to read, e.g. /notes.md. Relative paths and paths with '..' are refused."),
			"offset", `{"type":"integer","default":0,"description":"Line to start reading from, counting from 0 (offset 0 is the first line). Use it to page through a long file."}`,
			"limit", `{"type":"integer","default":100,"description":"How many lines to read at most. Use it with offset to read a long file a page at a time."}`)},
		run: runReadFile},
	{def: ToolDef{Name: "write_file",
		Description: "Writes a new file to the virtual filesystem. It refuses to overwrite a file that already exists: change an existing file with edit_file instead.\n\n" +
			"Usage:\n" +
			"- Use it to create a file; you do not need to read anything first.\n" +
			"- Prefer editing an existing file (with edit_file) over creating a new one.",
		Parameters: schema([]string{"file_path", "content"},
			"file_path", prop("string", "Absolute path of the new file, e.g. /report.md. Relative paths are refused."),
			"content", prop("string", "The whole text content of the new file. This parameter is required."))},
		run: runWriteFile},
	{def: ToolDef{Name: "edit_file",
		Description: "Performs exact string replacements in a file.\n\n" +
			"Usage:\n" +
			"- Read the file with read_file first: this tool needs old_string exactly as the file has it.\n" +
			"- Keep the indentation exactly as read, and never put read_file's line-number prefixes in old_string or new_string.\n" +
			"- When old_string occurs more than once, add context until it is unique, or set replace_all.\n" +
			"- Prefer editing an existing file over creating a new one.",
		Parameters: schema([]string{"file_path", "old_string", "new_string"},
			"file_path", prop("string", "Absolute path of the file to edit, e.g. /notes.md."),
			"old_string", prop("string", "The exact text to replace. It must occur exactly once in the file unless replace_all is true."),
			"new_string", prop("string", "The new text."),
			"replace_all", `{"type":"boolean","default":false,"description":"If true, replace every occurrence of old_string; if false (the default), it must occur once."}`)},
		run: runEditFile},
	{def: ToolDef{Name: "delete",
		Description: "Deletes a file from the virtual filesystem.\n\n" +
			"Usage:\n" +
			"- Permanently removes the file at the given absolute path; a file that does not exist is an error.\n" +
			"- This cannot be undone, so delete only files you are sure are no longer needed.\n" +
			"- Directories have no existence of their own here: a directory disappears with its last file.",
		Parameters: schema([]string{"file_path"}, "file_path", prop("string", "Absolute path of the file to delete. Relative paths are refused."))},
		run: runDelete},
	{def: ToolDef{Name: "glob",
		Description: "Finds the files whose paths match a glob pattern and returns their absolute paths, one per line, in sorted order.\n\n" +
			"Supports `*` (any characters within one path segment), `**` (any number of directories), `?` (one character other than '/') " +
			"and `[abc]` (one character from a set; `[!abc]` negates it), e.g. `*.md`, `docs/**/*.md`, `notes/?.txt`.\n\n" +
			"The pattern is matched against the path relative to the search root, given by path (the root `/` by default): `*.md` matches only " +
			"the files directly under the search root, while `**/*.md` matches them at any depth, the root included. A leading `/` on the pattern " +
			"is ignored, so `/*.md` is the same as `*.md`.\n\n" +
			"Names beginning with a dot are matched like any other: there are no hidden files in the virtual filesystem, so `*` also matches `.env`. " +
			"When nothing matches, the result says so rather than returning an empty list. To search the contents of files rather than their names, use grep; " +
			"to see what one directory holds, ls is cheaper.",
		Parameters: schema([]string{"pattern"},
			"pattern", prop("string", "Glob pattern to match the paths against, relative to path (e.g. '*.md', '**/*.md', 'notes/**/draft-?.md'). "+
				"'*' stays within one path segment and '**' crosses directories; a leading '/' is ignored. "+
				"Brace alternatives such as '*.{md,txt}' are not supported: run one glob per extension instead."),
			"path", prop("string", "Directory to search from, as an absolute path. Defaults to the root, /."))},
		run: runGlob},
	{def: ToolDef{Name: "grep",
		Description: "Searches the contents of files for a LITERAL text pattern (NOT a regular expression).\n\n" +
			"The pattern is matched verbatim: the characters of regular expressions are ordinary characters here, not operators. " +
			"To find any of several strings, run one grep for each; `grep(pattern=\"foo|bar\")` looks for the literal text \"foo|bar\", " +
			"and `.*` matches a dot followed by an asterisk.\n\n" +
			"Returns matching files or matching lines, per output_mode. Narrow the search with path (a directory) and glob (a file-name pattern). " +
			"Histories folded away by summarization are kept under /conversation_history/, and grep searches them like any other file: " +
			"grep that directory to find something said earlier in the conversation when you do not know which file holds it.\n\n" +
			"Matching is case-sensitive and line by line: a pattern cannot span two lines.",
		Parameters: schema([]string{"pattern"},
			"pattern", prop("string", "Text to search for: a literal string, not a regular expression."),
			"path", prop("string", "Directory to search in, as an absolute path. Defaults to the root, /."),
			"glob", prop("string", "Glob pattern (NOT a regular expression) limiting which files are searched (e.g. '*.md', '*.txt'). "+
				"A pattern without '/' matches the file name at any depth; a pattern containing '/' matches the path relative to path "+
				"(e.g. 'docs/**/*.md'). This filters files within this tool; it does not call the separate glob tool. "+
				"Brace alternatives (e.g. '*.{md,txt}') are not supported: run one search per extension."),
			"output_mode", `{"type":"string","enum":["files_with_matches","content","count"],"default":"files_with_matches","description":`+
				`"Shape of the result. 'files_with_matches' (the default): the paths of the matching files, one per line. `+
				`'content': every matching line as '<path>:<line number>:<line text>' (only the matching line, no context around it). `+
				`'count': one '<path>:<number of matching lines>' line per file."}`,
			"max_count", `{"type":"integer","minimum":1,"description":"Stop reading a file after this many matching lines. `+
				`Leave it unset to find every match; with output_mode 'count' it caps each file's count."}`)},
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
