package delegation

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"
)

// Todo is an item of an agent's todo list (write_todos).
type Todo struct {
	Content string `json:"content"`
	Status  string `json:"status"`
}

// workspace is an agent's state besides messages: its files and todos, and
// the changes it made to its files (what the delta merge sends back).
type workspace struct {
	files   map[string]string
	changes []FileChange   // since the workspace was made, one per path, in order of first change
	changed map[string]int // path -> index in changes
	recent  []FileChange   // since the last takeRecent, for files.changed events
	todos   []Todo
	sorted  []string // the paths in order; nil when a path was added or removed since
	// staging is set while a tool call of an assistant message runs: what
	// the call changes is collected in staged (made on its first change)
	// instead of changing the workspace, since every call of one message
	// reads the state as it was before the message (delegation.md §8).
	staging bool
	staged  *stage
}

// stage is what one tool call changed, applied once every call of its
// message has run, in call order. deepagents runs each tool call of an
// AIMessage as its own task of one graph step, each reading the state of
// the step's start, and reduces their updates in call order (LangGraph's
// ToolNode fan-out; the files channel's reducer, _file_data_reducer,
// middleware/filesystem.py:1009, merges each update over the last per path).
type stage struct {
	changes []FileChange
	todos   []Todo
	setTodo bool
}

// begin starts staging the changes of one tool call.
func (w *workspace) begin() { w.staging, w.staged = true, nil }

// end stops staging and returns what the call changed, nil for nothing.
func (w *workspace) end() *stage {
	st := w.staged
	w.staging, w.staged = false, nil
	return st
}

// stage returns the stage of the running call, made on its first change.
func (w *workspace) stage() *stage {
	if w.staged == nil {
		w.staged = &stage{}
	}
	return w.staged
}

// apply makes a staged call's changes, in the order the call made them.
func (w *workspace) apply(st *stage) {
	if st == nil {
		return
	}
	w.applyChanges(st.changes)
	if st.setTodo {
		w.todos = st.todos
	}
}

func newWorkspace(files map[string]string) *workspace {
	w := &workspace{files: make(map[string]string, len(files)), changed: map[string]int{}}
	for p, c := range files {
		w.files[p] = c
	}
	return w
}

// fork returns a copy for a child: the same files, no recorded changes.
func (w *workspace) fork(withTodos bool) *workspace {
	c := newWorkspace(w.files)
	if withTodos {
		c.todos = append([]Todo(nil), w.todos...)
	}
	return c
}

func (w *workspace) record(ch FileChange) {
	w.recent = append(w.recent, ch)
	if i, ok := w.changed[ch.Path]; ok {
		w.changes[i] = ch
		return
	}
	w.changed[ch.Path] = len(w.changes)
	w.changes = append(w.changes, ch)
}

func (w *workspace) write(p, content string) {
	if w.staging {
		st := w.stage()
		st.changes = append(st.changes, FileChange{Path: p, Content: content})
		return
	}
	if _, ok := w.files[p]; !ok {
		w.sorted = nil
	}
	w.files[p] = content
	w.record(FileChange{Path: p, Content: content})
}

func (w *workspace) remove(p string) {
	if w.staging {
		st := w.stage()
		st.changes = append(st.changes, FileChange{Path: p, Deleted: true})
		return
	}
	w.sorted = nil
	delete(w.files, p)
	w.record(FileChange{Path: p, Deleted: true})
}

// applyChanges makes writes and deletes, in order; a delete of a file that
// is gone already changes nothing.
func (w *workspace) applyChanges(changes []FileChange) {
	for _, ch := range changes {
		if ch.Deleted {
			if _, ok := w.files[ch.Path]; ok {
				w.remove(ch.Path)
			}
		} else {
			w.write(ch.Path, ch.Content)
		}
	}
}

// setTodos replaces the todo list (staged while a tool call runs).
func (w *workspace) setTodos(todos []Todo) {
	if w.staging {
		st := w.stage()
		st.todos, st.setTodo = todos, true
		return
	}
	w.todos = todos
}

// takeRecent returns the changes since it was last called.
func (w *workspace) takeRecent() []FileChange {
	ch := w.recent
	w.recent = nil
	return ch
}

func (w *workspace) snapshot() map[string]string {
	m := make(map[string]string, len(w.files))
	for p, c := range w.files {
		m[p] = c
	}
	return m
}

// sortedPaths lists the paths in order. ls, glob and grep call it on every
// use, so the order is kept until a path is added or removed.
func (w *workspace) sortedPaths() []string {
	if w.sorted != nil {
		return w.sorted
	}
	paths := make([]string, 0, len(w.files))
	for p := range w.files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	w.sorted = paths
	return paths
}

// cleanPath checks that p is absolute and free of "..", and normalizes it.
func cleanPath(p string) (string, error) {
	if len(p) > MaxPathLen {
		return "", toolErrorf("Path '%s' is not allowed: it is %d bytes long; the most is %d.", shortText(p), len(p), MaxPathLen)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", toolErrorf("Path '%s' is not allowed: it contains a NUL character.", shortText(strings.ReplaceAll(p, "\x00", `\0`)))
	}
	if !strings.HasPrefix(p, "/") {
		return "", toolErrorf("Path '%s' is not allowed: paths are absolute, like /notes.md.", p)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return "", toolErrorf("Path '%s' is not allowed: '..' cannot be used; give the absolute path.", p)
		}
	}
	return path.Clean(p), nil
}

// CheckPath reports whether p is a path the virtual filesystem accepts, for
// validating inputs such as a scenario's files.
func CheckPath(p string) error {
	_, err := cleanPath(p)
	return err
}

func dirPrefix(dir string) string {
	if dir == "/" {
		return "/"
	}
	return dir + "/"
}

func runLS(ctx context.Context, w *workspace, args json.RawMessage) (string, error) {
	var a struct {
		Path string `json:"path"`
	}
	if err := decodeArgs("ls", args, &a); err != nil {
		return "", err
	}
	if a.Path == "" {
		a.Path = "/"
	}
	dir, err := cleanPath(a.Path)
	if err != nil {
		return "", err
	}
	prefix := dirPrefix(dir)
	seen := map[string]bool{}
	var entries []string
	for _, p := range w.sortedPaths() {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		rest, ok := strings.CutPrefix(p, prefix)
		if !ok {
			continue
		}
		name := prefix + rest
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			name = prefix + rest[:i] + "/"
		}
		if !seen[name] {
			seen[name] = true
			entries = append(entries, name)
		}
	}
	if len(entries) == 0 {
		if _, isFile := w.files[dir]; isFile {
			return "", toolErrorf("'%s' is a file, not a directory; read it with read_file.", dir)
		}
		if dir == "/" {
			return "(the filesystem is empty)", nil
		}
		return "", toolErrorf("Directory '%s' not found or empty; ls / shows what exists.", dir)
	}
	return strings.Join(entries, "\n"), nil
}

func runReadFile(ctx context.Context, w *workspace, args json.RawMessage) (string, error) {
	a := struct {
		FilePath string `json:"file_path"`
		Offset   int    `json:"offset"`
		Limit    int    `json:"limit"`
	}{Limit: 100}
	if err := decodeArgs("read_file", args, &a); err != nil {
		return "", err
	}
	if err := required("read_file", "file_path", a.FilePath); err != nil {
		return "", err
	}
	p, err := cleanPath(a.FilePath)
	if err != nil {
		return "", err
	}
	content, ok := w.files[p]
	if !ok {
		return "", toolErrorf("File '%s' not found; ls or glob shows what exists.", p)
	}
	if content == "" {
		return "(the file exists and is empty)", nil
	}
	if a.Offset < 0 || a.Limit < 1 {
		return "", toolErrorf("Invalid arguments for read_file: offset must be 0 or more and limit 1 or more.")
	}
	lines := strings.Split(strings.TrimSuffix(content, "\n"), "\n")
	if a.Offset >= len(lines) {
		return "", toolErrorf("Offset %d is past the end of '%s', which has %d lines.", a.Offset, p, len(lines))
	}
	end := min(a.Offset+a.Limit, len(lines))
	// A window too big for a tool result is cut as deepagents cuts it,
	// under its truncation notice (delegation.md §12, evict.go).
	cut := cutRead(lines[a.Offset:end], a.Offset, len(lines), p)
	var b strings.Builder
	if cut.Truncated {
		b.WriteString(jsReplace(ReadFileTruncationMsg, "{file_path}", p))
		b.WriteByte('\n')
		end = a.Offset + cut.Lines
	}
	for i := a.Offset; i < end; i++ {
		fmt.Fprintf(&b, "%6d\t%s\n", i+1, lines[i])
	}
	if cut.Truncated && cut.Lines == 0 {
		fmt.Fprintf(&b, "%6d\t%s\n", a.Offset+1, jsPrefix(lines[a.Offset], cut.Shown))
		fmt.Fprintf(&b, "(line %d is cut: %d of its %d characters are shown)\n", a.Offset+1, cut.Shown, cut.Oversized)
		end = a.Offset + 1
	}
	if end < len(lines) {
		fmt.Fprintf(&b, "(%d more lines; read on with offset %d)\n", len(lines)-end, end)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

func runWriteFile(ctx context.Context, w *workspace, args json.RawMessage) (string, error) {
	var a struct {
		FilePath string  `json:"file_path"`
		Content  *string `json:"content"`
	}
	if err := decodeArgs("write_file", args, &a); err != nil {
		return "", err
	}
	if a.Content == nil {
		return "", toolErrorf("Invalid arguments for write_file: missing content.")
	}
	if err := required("write_file", "file_path", a.FilePath); err != nil {
		return "", err
	}
	p, err := cleanPath(a.FilePath)
	if err != nil {
		return "", err
	}
	if _, exists := w.files[p]; exists {
		return "", toolErrorf("Cannot write to '%s' because it already exists; read it, then change it with edit_file.", p)
	}
	w.write(p, *a.Content)
	return fmt.Sprintf("Wrote %s (%d bytes).", p, len(*a.Content)), nil
}

func runEditFile(ctx context.Context, w *workspace, args json.RawMessage) (string, error) {
	var a struct {
		FilePath   string `json:"file_path"`
		OldString  string `json:"old_string"`
		NewString  string `json:"new_string"`
		ReplaceAll bool   `json:"replace_all"`
	}
	if err := decodeArgs("edit_file", args, &a); err != nil {
		return "", err
	}
	if err := required("edit_file", "file_path", a.FilePath, "old_string", a.OldString); err != nil {
		return "", err
	}
	p, err := cleanPath(a.FilePath)
	if err != nil {
		return "", err
	}
	content, ok := w.files[p]
	if !ok {
		return "", toolErrorf("File '%s' not found; create it with write_file.", p)
	}
	n := strings.Count(content, a.OldString)
	switch {
	case n == 0:
		return "", toolErrorf("old_string was not found in '%s'; read the file and copy the text exactly.", p)
	case n > 1 && !a.ReplaceAll:
		return "", toolErrorf("old_string appears %d times in '%s'; include more surrounding text so it matches once, or set replace_all.", n, p)
	}
	if a.ReplaceAll {
		content = strings.ReplaceAll(content, a.OldString, a.NewString)
	} else {
		content = strings.Replace(content, a.OldString, a.NewString, 1)
	}
	w.write(p, content)
	return fmt.Sprintf("Edited %s: replaced %d occurrence(s).", p, n), nil
}

func runDelete(ctx context.Context, w *workspace, args json.RawMessage) (string, error) {
	var a struct {
		FilePath string `json:"file_path"`
	}
	if err := decodeArgs("delete", args, &a); err != nil {
		return "", err
	}
	if err := required("delete", "file_path", a.FilePath); err != nil {
		return "", err
	}
	p, err := cleanPath(a.FilePath)
	if err != nil {
		return "", err
	}
	if _, ok := w.files[p]; !ok {
		return "", toolErrorf("File '%s' not found; nothing was deleted.", p)
	}
	w.remove(p)
	return "Deleted " + p + ".", nil
}

func runGlob(ctx context.Context, w *workspace, args json.RawMessage) (string, error) {
	var a struct {
		Pattern string `json:"pattern"`
		Path    string `json:"path"`
	}
	if err := decodeArgs("glob", args, &a); err != nil {
		return "", err
	}
	if err := required("glob", "pattern", a.Pattern); err != nil {
		return "", err
	}
	if a.Path == "" {
		a.Path = "/"
	}
	dir, err := cleanPath(a.Path)
	if err != nil {
		return "", err
	}
	g, err := compileGlob(strings.TrimPrefix(a.Pattern, "/"))
	if err != nil {
		return "", err
	}
	prefix := dirPrefix(dir)
	var out []string
	for _, p := range w.sortedPaths() {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		if rest, ok := strings.CutPrefix(p, prefix); ok && g.match(rest) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return "No files match " + a.Pattern + " under " + dir + ".", nil
	}
	return strings.Join(out, "\n"), nil
}

func runGrep(ctx context.Context, w *workspace, args json.RawMessage) (string, error) {
	var a struct {
		Pattern    string `json:"pattern"`
		Path       string `json:"path"`
		Glob       string `json:"glob"`
		OutputMode string `json:"output_mode"`
		MaxCount   int    `json:"max_count"`
	}
	if err := decodeArgs("grep", args, &a); err != nil {
		return "", err
	}
	if err := required("grep", "pattern", a.Pattern); err != nil {
		return "", err
	}
	if a.Path == "" {
		a.Path = "/"
	}
	dir, err := cleanPath(a.Path)
	if err != nil {
		return "", err
	}
	switch a.OutputMode {
	case "":
		a.OutputMode = "files_with_matches"
	case "files_with_matches", "content", "count":
	default:
		return "", toolErrorf("Invalid output_mode '%s': use files_with_matches, content or count.", a.OutputMode)
	}
	if len(a.Pattern) > MaxSearchLen {
		return "", toolErrorf("Invalid arguments for grep: pattern is %d bytes long; the most is %d.", len(a.Pattern), MaxSearchLen)
	}
	var g *glob
	if a.Glob != "" {
		if g, err = compileGlob(strings.TrimPrefix(a.Glob, "/")); err != nil {
			return "", err
		}
	}
	prefix := dirPrefix(dir)
	var out []string
	for _, p := range w.sortedPaths() {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		rest, ok := strings.CutPrefix(p, prefix)
		if !ok && p != dir {
			continue
		}
		// A glob without a slash matches the file name at any depth.
		if g != nil && !g.match(rest) && !(strings.IndexByte(a.Glob, '/') < 0 && g.match(path.Base(p))) {
			continue
		}
		content := w.files[p]
		if !strings.Contains(content, a.Pattern) {
			continue
		}
		n, i := 0, -1
		for line := range strings.Lines(content) {
			i++
			line = strings.TrimSuffix(line, "\n")
			if !strings.Contains(line, a.Pattern) {
				continue
			}
			n++
			if a.OutputMode == "content" {
				out = append(out, fmt.Sprintf("%s:%d:%s", p, i+1, line))
			}
			if a.MaxCount > 0 && n >= a.MaxCount {
				break
			}
		}
		switch {
		case n == 0:
		case a.OutputMode == "files_with_matches":
			out = append(out, p)
		case a.OutputMode == "count":
			out = append(out, fmt.Sprintf("%s:%d", p, n))
		}
	}
	if len(out) == 0 {
		return fmt.Sprintf("No matches for '%s' under %s.", a.Pattern, dir), nil
	}
	return strings.Join(out, "\n"), nil
}

func runWriteTodos(ctx context.Context, w *workspace, args json.RawMessage) (string, error) {
	var a struct {
		Todos []Todo `json:"todos"`
	}
	if err := decodeArgs(WriteTodosToolName, args, &a); err != nil {
		return "", err
	}
	for i, t := range a.Todos {
		switch t.Status {
		case "pending", "in_progress", "completed":
		default:
			return "", toolErrorf("Invalid arguments for write_todos: todos[%d].status must be pending, in_progress or completed.", i)
		}
		if strings.TrimSpace(t.Content) == "" {
			return "", toolErrorf("Invalid arguments for write_todos: todos[%d].content is empty.", i)
		}
	}
	w.setTodos(a.Todos)
	done := 0
	for _, t := range a.Todos {
		if t.Status == "completed" {
			done++
		}
	}
	return fmt.Sprintf("Updated the todo list: %d items, %d completed.", len(a.Todos), done), nil
}
