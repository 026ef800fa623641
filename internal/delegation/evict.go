package delegation

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
)

// Big tool results and big prompts (delegation.md §12), as deepagents JS
// 1.14.1's FilesystemMiddleware has them (src/middleware/fs.ts, read from
// the package's source map): read_file cuts its own output at 80,000
// characters; any other tool's result over 80,000 characters is written to
// /large_tool_results/ and the model gets a pointer and a preview instead;
// a human message over 200,000 characters is written to
// /conversation_history/ and the model gets a pointer and a preview. Sizes
// are JavaScript string lengths (UTF-16 code units), as deepagents measures
// them: its token limits are characters / NUM_CHARS_PER_TOKEN.
const (
	// NumCharsPerToken is deepagents' estimate of characters per token for
	// its size limits (fs.ts:127, NUM_CHARS_PER_TOKEN).
	NumCharsPerToken = 4
	// ToolTokenLimitBeforeEvict and HumanMessageTokenLimitBeforeEvict are
	// createFilesystemMiddleware's defaults (fs.ts:1959-1960).
	ToolTokenLimitBeforeEvict         = 20000
	HumanMessageTokenLimitBeforeEvict = 50000
	// ToolResultEvictChars and HumanMessageEvictChars are those limits in
	// characters: a text longer than this is evicted (fs.ts:2068, :2141).
	ToolResultEvictChars   = ToolTokenLimitBeforeEvict * NumCharsPerToken
	HumanMessageEvictChars = HumanMessageTokenLimitBeforeEvict * NumCharsPerToken
	// ReadFileMaxChars is the most a read_file result holds: read_file
	// truncates at the tool limit, in characters (fs.ts:304, :312).
	ReadFileMaxChars = ToolResultEvictChars
	// LargeToolResultsDir and ConversationHistoryDir are where evicted
	// tool results and human messages go (fs.ts:2083, :2151).
	LargeToolResultsDir    = "/large_tool_results/"
	ConversationHistoryDir = "/conversation_history/"
)

// ReadFileTruncationMsg heads a read_file result cut to fit: deepagents'
// READ_FILE_TRUNCATION_MSG (fs.ts:146-148), trimmed as truncatePaginatedRead
// uses it (fs.ts:307-310), {file_path} filled with the path read.
const ReadFileTruncationMsg = "[Output was truncated due to size limits. The file content is very large. Consider reformatting the file to make it easier to navigate. " +
	"For example, if this is JSON, use execute(command='jq . {file_path}') to pretty-print it with line breaks. " +
	"For other formats, you can use appropriate formatting tools to split long lines.]"

// TooLargeToolMsg is deepagents' TOO_LARGE_TOOL_MSG (fs.ts:371-384), as
// langchain's context template dedents it.
const TooLargeToolMsg = "Tool result too large, the result of this tool call {tool_call_id} was saved in the filesystem at this path: {file_path}\n" +
	"You can read the result from the filesystem by using the read_file tool, but make sure to only read part of the result at a time.\n" +
	"You can do this by specifying an offset and limit in the read_file tool call.\n" +
	"For example, to read the first 100 lines, you can use the read_file tool with offset=0 and limit=100.\n\n" +
	"Here is a preview showing the head and tail of the result (lines of the form\n" +
	"... [N lines truncated] ...\n" +
	"indicate omitted lines in the middle of the content):\n\n" +
	"{content_sample}"

// TooLargeHumanMsg is deepagents' TOO_LARGE_HUMAN_MSG (fs.ts:386-395).
const TooLargeHumanMsg = "Message content too large and was saved to the filesystem at: {file_path}\n\n" +
	"You can read the full content using the read_file tool with pagination (offset and limit parameters).\n\n" +
	"Here is a preview showing the head and tail of the content:\n\n" +
	"{content_sample}"

// Eviction says that a message's text was moved to a file and what the
// model reads instead (the message's content, counted in its Tokens).
type Eviction struct {
	// Path is the file that holds the original text.
	Path string `json:"path"`
	// Chars is the original's length as deepagents measures it (UTF-16
	// code units), Tokens its tokens with the session's tokenizer.
	Chars  int `json:"chars"`
	Tokens int `json:"tokens"`
}

// evictionExempt are the tools whose results are never evicted:
// TOOLS_EXCLUDED_FROM_EVICTION, every filesystem tool but execute
// (fs.ts:101-120): ls, glob and grep cut their own output, read_file cuts
// its own (ReadFileMaxChars), and the others answer in a line. What is left
// is task (a child's receipt), write_todos and a structured answer's tool.
var evictionExempt = map[string]bool{"ls": true, "read_file": true, "write_file": true, "edit_file": true,
	"delete": true, "glob": true, "grep": true}

// jsLen is a string's length as JavaScript counts it: UTF-16 code units.
func jsLen(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r) // an invalid byte is U+FFFD here: one unit
	}
	return n
}

// jsPrefix is the longest prefix of s of at most n UTF-16 code units, as
// String.prototype.substring(0, n) keeps it (a surrogate pair it would
// split is left out whole).
func jsPrefix(s string, n int) string {
	units := 0
	for i, r := range s {
		w := max(utf16.RuneLen(r), 1)
		if units+w > n {
			return s[:i]
		}
		units += w
	}
	return s
}

// jsReplace replaces the first old in s with repl as String.prototype.replace
// does with a string: "$$", "$&", "$`" and "$'" in repl are patterns.
func jsReplace(s, old, repl string) string {
	i := strings.Index(s, old)
	if i < 0 {
		return s
	}
	if !strings.Contains(repl, "$") {
		return s[:i] + repl + s[i+len(old):]
	}
	var b strings.Builder
	b.WriteString(s[:i])
	for j := 0; j < len(repl); j++ {
		if repl[j] == '$' && j+1 < len(repl) {
			switch repl[j+1] {
			case '$':
				b.WriteByte('$')
				j++
				continue
			case '&':
				b.WriteString(old)
				j++
				continue
			case '`':
				b.WriteString(s[:i])
				j++
				continue
			case '\'':
				b.WriteString(s[i+len(old):])
				j++
				continue
			}
		}
		b.WriteByte(repl[j])
	}
	b.WriteString(s[i+len(old):])
	return b.String()
}

// contentPreview is deepagents' createContentPreview (fs.ts:503-529): the
// first and last five lines, each cut to 1,000 characters and numbered as
// cat -n numbers them, with a count of the lines between.
func contentPreview(s string) string {
	const head, tail = 5, 5
	lines := strings.Split(s, "\n")
	if len(lines) <= head+tail {
		return numberLines(lines, 1, 1000)
	}
	return numberLines(lines[:head], 1, 1000) +
		fmt.Sprintf("\n... [%d lines truncated] ...\n", len(lines)-head-tail) +
		numberLines(lines[len(lines)-tail:], len(lines)-tail+1, 1000)
}

// numberLines numbers lines from start as formatContentWithLineNumbers does
// (backends/utils.ts:203-265): six columns, a tab, the line, each cut to cut
// characters first. (Lines over MAX_LINE_LENGTH, 5,000, would be split into
// continuation rows; at 1,000 none is.)
func numberLines(lines []string, start, cut int) string {
	var b strings.Builder
	for i, l := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%6d\t%s", start+i, jsPrefix(l, cut))
	}
	return b.String()
}

// evictedToolPath is where a tool result is written: its call id with '.',
// '/' and '\' made '_' (sanitizeToolCallId, backends/utils.ts:179-181),
// under /large_tool_results/ (fs.ts:2075-2083). deepagents names an id over
// 128 bytes with a random UUID; ours is the id's hash, so a run is the same
// every time.
func evictedToolPath(toolCallID string) string {
	id := strings.NewReplacer(".", "_", "/", "_", `\`, "_").Replace(toolCallID)
	if len(id) > 128 {
		sum := sha256.Sum256([]byte(toolCallID))
		id = "call-" + hex.EncodeToString(sum[:16])
	}
	return LargeToolResultsDir + id + ".txt"
}

// evictedHumanPath is where a human message is written: deepagents names it
// with 12 random hex digits (fs.ts:2150-2151); ours are the hash of the
// session and the message, so a run is the same every time.
func evictedHumanPath(sessionID, messageID string) string {
	sum := sha256.Sum256([]byte(sessionID + "\x00" + messageID))
	return ConversationHistoryDir + hex.EncodeToString(sum[:])[:12]
}

// toolPointer is what the model reads in place of an evicted tool result
// (fs.ts:2089-2097): the call id, cut to 32 characters, the file, a preview.
func toolPointer(toolCallID, filePath, content string) string {
	id := toolCallID
	if jsLen(id) > 32 {
		id = jsPrefix(id, 32) + "..."
	}
	text := jsReplace(TooLargeToolMsg, "{tool_call_id}", id)
	text = jsReplace(text, "{file_path}", filePath)
	return jsReplace(text, "{content_sample}", contentPreview(content))
}

// humanPointer is what the model reads in place of an evicted human message
// (buildTruncatedHumanMessage, fs.ts:477-495).
func humanPointer(filePath, content string) string {
	text := jsReplace(TooLargeHumanMsg, "{file_path}", filePath)
	return jsReplace(text, "{content_sample}", contentPreview(content))
}

// evictToolResult moves a tool result over ToolResultEvictChars into a file
// of the agent's workspace and puts the pointer in its place, as
// deepagents' wrapToolCall does (fs.ts:2233-2316, processToolMessage
// :2048-2115) for every tool but the exempt ones. It runs when the result
// enters the agent's list, after the call's own changes (a child's files)
// are merged, as deepagents adds the file to the same update.
func (e *Engine) evictToolResult(a *agent, toolName string, m *Message) {
	if evictionExempt[toolName] || jsLen(m.Content) <= ToolResultEvictChars {
		return
	}
	p := evictedToolPath(m.ToolCallID)
	e.evict(a, m, p, toolPointer(m.ToolCallID, p, m.Content))
}

// evictHumanMessage moves an agent's opening human message over
// HumanMessageEvictChars into a file, as deepagents' beforeAgent does
// (fs.ts:2119-2177) for the last message when an agent starts: the main
// agent's prompt, a child's task message or fork preamble. deepagents keeps
// the text in its state, tagged, and puts the pointer in every model call
// (wrapModelCall, fs.ts:2204-2224, outside the summarization middleware, so
// summarization counts the pointer); the pointer is what every call of
// ours reads, so the message holds it.
func (e *Engine) evictHumanMessage(a *agent, m *Message) {
	if m.Role != RoleUser || jsLen(m.Content) <= HumanMessageEvictChars {
		return
	}
	p := evictedHumanPath(e.cfg.SessionID, a.info.ID+"."+strconv.Itoa(len(a.msgs)))
	e.evict(a, m, p, humanPointer(p, m.Content))
}

func (e *Engine) evict(a *agent, m *Message, filePath, pointer string) {
	a.ws.write(filePath, m.Content)
	e.emitFileChanges(a, "")
	m.Evicted = &Eviction{Path: filePath, Chars: jsLen(m.Content), Tokens: e.count(m.Content)}
	m.Content = pointer
}

// readCut is how much of a read_file window fits ReadFileMaxChars, as
// deepagents' truncatePaginatedRead decides it (fs.ts:281-353): measured on
// deepagents' own result — its status header ("@@ lines S-E of T | next
// offset E @@", fs.ts:151-197) above the window's lines as the file has
// them — so the cut falls on the same line as deepagents' does, though
// ours numbers its lines (its size differs by our numbers).
type readCut struct {
	// Lines is how many whole lines of the window are shown; all of them
	// when Truncated is false.
	Lines     int
	Truncated bool
	// Shown is, when no whole line fits (Lines 0, Truncated), how many
	// characters of the window's first line are shown, of its Oversized.
	Shown, Oversized int
}

// cutRead decides a read_file window's cut: window holds the lines read
// from offset, total is the file's line count.
func cutRead(window []string, offset, total int, filePath string) readCut {
	start := offset + 1
	header := func(end int, extra ...string) int {
		f := fmt.Sprintf("lines %d-%d of %d", start, end, total)
		if end < total {
			f += fmt.Sprintf(" | next offset %d", end)
		}
		for _, x := range extra {
			f += " | " + x
		}
		return jsLen("@@ " + f + " @@")
	}
	rows := make([]int, len(window)) // each line's length
	body := 0
	for i, l := range window {
		rows[i] = jsLen(l)
		body += rows[i]
	}
	body += len(window) - 1
	if header(offset+len(window))+1+body < ReadFileMaxChars {
		return readCut{Lines: len(window)}
	}
	msg := jsLen(jsReplace(ReadFileTruncationMsg, "{file_path}", filePath))
	end := body
	for i := len(window) - 1; i >= 0; i-- {
		if msg+1+header(offset+i+1, "truncated due to size")+1+end <= ReadFileMaxChars {
			return readCut{Lines: i + 1, Truncated: true}
		}
		end -= rows[i] + 1
	}
	// No whole line fits (midlineTruncatedRead, fs.ts:241-272): the first
	// line is cut, its header saying how much of it is shown.
	over := rows[0]
	mid := func(shown int) int {
		f := fmt.Sprintf("lines %d-%d of %d | truncated mid-line | %d of %d chars", start, start, total, shown, over)
		return jsLen("@@ " + f + " @@")
	}
	shown := max(0, min(over, ReadFileMaxChars-(msg+1+mid(over)+1)))
	return readCut{Truncated: true, Shown: shown, Oversized: over}
}
