package trace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/delegationstudio/studio/internal/delegation"
)

// Write writes a session's trace to w as it reads it from src, part by
// part, so that a session of any size is exported in the memory of one
// message: compact JSON, or indented by two spaces when pretty. The bytes
// are those of json.Marshal (or json.MarshalIndent) of the whole trace,
// followed by a newline.
func Write(w io.Writer, src Source, pretty bool) error {
	h := src.Head()
	session := h.Session
	scenario := h.Scenario
	if len(scenario) == 0 {
		scenario = json.RawMessage("{}")
	}
	jw := &jsonWriter{w: bufio.NewWriterSize(w, 64<<10), pretty: pretty}
	jw.raw("{")
	jw.field("format", Format, true)
	jw.field("version", Version, false)
	jw.field("session", session, false)
	jw.key("scenario", false)
	if !jw.rawJSON(scenario) {
		jw.value(scenario, 1)
	}
	if err := jw.array("agents", seqAny(src.Agents())); err != nil {
		return fmt.Errorf("write the trace's agents: %w", err)
	}
	if err := jw.array("messages", seqAny(src.Messages())); err != nil {
		return fmt.Errorf("write the trace's messages: %w", err)
	}
	if err := jw.array("model_calls", seqAny(src.ModelCalls())); err != nil {
		return fmt.Errorf("write the trace's model calls: %w", err)
	}
	if err := jw.array("events", seqAny(src.Events())); err != nil {
		return fmt.Errorf("write the trace's events: %w", err)
	}
	if err := jw.files(src.Files()); err != nil {
		return fmt.Errorf("write the trace's files: %w", err)
	}
	jw.newline(0)
	jw.raw("}\n")
	if jw.err != nil {
		return jw.err
	}
	return jw.w.Flush()
}

func seqAny[T any](s iter.Seq2[T, error]) iter.Seq2[any, error] {
	return func(yield func(any, error) bool) {
		for v, err := range s {
			if !yield(v, err) {
				return
			}
		}
	}
}

// jsonWriter writes one JSON object a member at a time, the way
// json.MarshalIndent would lay out the whole.
type jsonWriter struct {
	w      *bufio.Writer
	pretty bool
	err    error
	buf    bytes.Buffer
}

func (j *jsonWriter) raw(s string) {
	if j.err == nil {
		_, j.err = j.w.WriteString(s)
	}
}

func (j *jsonWriter) newline(depth int) {
	if j.pretty {
		j.raw("\n" + strings.Repeat("  ", depth))
	}
}

// value writes v encoded as json.Marshal does, indented for its depth.
func (j *jsonWriter) value(v any, depth int) {
	if j.err != nil {
		return
	}
	if ev, ok := v.(delegation.Event); ok && j.event(ev) {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		j.err = err
		return
	}
	if !j.pretty {
		_, j.err = j.w.Write(b)
		return
	}
	j.buf.Reset()
	if j.err = json.Indent(&j.buf, b, strings.Repeat("  ", depth), "  "); j.err == nil {
		_, j.err = j.w.Write(j.buf.Bytes())
	}
}

// event writes a compact event as json.Marshal does, but without copying
// its data: a stored event's data is already compact JSON, and may be
// megabytes (a file's whole content), which Marshal would copy several
// times over. It reports false, having written nothing, when the data is
// not compact.
func (j *jsonWriter) event(ev delegation.Event) bool {
	if j.pretty || len(ev.Data) == 0 || !IsCompact(ev.Data) {
		return false
	}
	head := append([]byte(`{"seq":`), strconv.AppendInt(nil, ev.Seq, 10)...)
	typ, _ := json.Marshal(string(ev.Type))
	head = append(append(head, `,"type":`...), typ...)
	head = append(head, `,"agent_id":`...)
	if ev.AgentID == "" {
		head = append(head, "null"...)
	} else {
		id, _ := json.Marshal(ev.AgentID)
		head = append(head, id...)
	}
	at, err := json.Marshal(ev.At.UTC())
	if err != nil {
		return false
	}
	head = append(append(append(head, `,"at":`...), at...), `,"data":`...)
	j.raw(string(head))
	j.escapedHTML(ev.Data)
	j.raw("}")
	return true
}

// rawJSON writes a compact JSON document as json.Marshal writes a
// json.RawMessage, without copying it; it reports false, having written
// nothing, when the document is not compact or the output is indented.
func (j *jsonWriter) rawJSON(doc []byte) bool {
	if j.pretty || len(doc) == 0 || !IsCompact(doc) {
		return false
	}
	j.escapedHTML(doc)
	return true
}

// str writes a string as json.Marshal does (escaping HTML too), in runs,
// without copying it.
func (j *jsonWriter) str(s string) {
	if j.err == nil {
		j.err = WriteJSONString(j.w, s)
	}
}

// WriteJSONString writes s as json.Marshal encodes a string (HTML escaped,
// invalid UTF-8 as U+FFFD), in runs, without copying it: a file's content
// can be megabytes.
func WriteJSONString(w io.StringWriter, s string) error {
	if _, err := w.WriteString(`"`); err != nil {
		return err
	}
	if err := writeEscaped(w, s); err != nil {
		return err
	}
	_, err := w.WriteString(`"`)
	return err
}

// JSONStringWriter writes what is written to it as the inside of a JSON
// string, escaped as json.Marshal escapes the whole of it: a rune split
// between two writes is held until it is whole. Close writes what is held
// (an incomplete rune at the very end, as Marshal writes one).
type JSONStringWriter struct {
	W    io.StringWriter
	held string
}

func (j *JSONStringWriter) Write(p []byte) (int, error) { return j.WriteString(string(p)) }

func (j *JSONStringWriter) WriteString(s string) (int, error) {
	n := len(s)
	if j.held != "" {
		s = j.held + s
		j.held = ""
	}
	// Hold back a rune begun in the last three bytes that is not whole.
	for i := len(s) - 1; i >= 0 && i >= len(s)-3; i-- {
		if utf8.RuneStart(s[i]) {
			if !utf8.FullRuneInString(s[i:]) {
				s, j.held = s[:i], s[i:]
			}
			break
		}
	}
	return n, writeEscaped(j.W, s)
}

// Close writes what is held.
func (j *JSONStringWriter) Close() error {
	h := j.held
	j.held = ""
	return writeEscaped(j.W, h)
}

// writeEscaped writes s as the inside of a JSON string, as json.Marshal
// escapes it.
func writeEscaped(w io.StringWriter, s string) error {
	const hex = "0123456789abcdef"
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		var esc string
		size := 1
		if c < utf8.RuneSelf {
			switch {
			case c == '"':
				esc = `\"`
			case c == '\\':
				esc = `\\`
			case c == '\n':
				esc = `\n`
			case c == '\r':
				esc = `\r`
			case c == '\t':
				esc = `\t`
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				esc = `\u00` + string(hex[c>>4]) + string(hex[c&0xF])
			default:
				i++
				continue
			}
		} else {
			r, n := utf8.DecodeRuneInString(s[i:])
			size = n
			switch {
			case r == utf8.RuneError && n == 1:
				esc = `\ufffd`
			case r == '\u2028' || r == '\u2029':
				esc = `\u202` + string(hex[r&0xF])
			default:
				i += n
				continue
			}
		}
		if _, err := w.WriteString(s[start:i]); err != nil {
			return err
		}
		if _, err := w.WriteString(esc); err != nil {
			return err
		}
		i += size
		start = i
	}
	_, err := w.WriteString(s[start:])
	return err
}

// IsCompact reports whether a JSON document has no space outside its
// strings: what json.Compact leaves, and what json.Marshal writes.
func IsCompact(b []byte) bool {
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case !inString && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return false
		}
	}
	return !inString
}

// escapedHTML writes compact JSON as json.Marshal does: <, >, & and
// U+2028, U+2029 escaped, the rest as it is, in runs.
func (j *jsonWriter) escapedHTML(b []byte) {
	const hex = "0123456789abcdef"
	start := 0
	for i := 0; i < len(b) && j.err == nil; i++ {
		var esc string
		switch c := b[i]; {
		case c == '<' || c == '>' || c == '&':
			esc = `\u00` + string(hex[c>>4]) + string(hex[c&0xF])
		case c == 0xE2 && i+2 < len(b) && b[i+1] == 0x80 && b[i+2]&^1 == 0xA8:
			esc = `\u202` + string(hex[b[i+2]&0xF])
		default:
			continue
		}
		if _, j.err = j.w.Write(b[start:i]); j.err == nil {
			_, j.err = j.w.WriteString(esc)
		}
		if b[i] == 0xE2 {
			i += 2
		}
		start = i + 1
	}
	if j.err == nil {
		_, j.err = j.w.Write(b[start:])
	}
}

func (j *jsonWriter) key(name string, first bool) {
	if !first {
		j.raw(",")
	}
	j.newline(1)
	j.value(name, 1)
	if j.pretty {
		j.raw(": ")
	} else {
		j.raw(":")
	}
}

func (j *jsonWriter) field(name string, v any, first bool) {
	j.key(name, first)
	j.value(v, 1)
}

func (j *jsonWriter) array(name string, items iter.Seq2[any, error]) error {
	j.key(name, false)
	j.raw("[")
	n := 0
	for v, err := range items {
		if err != nil {
			return err
		}
		if n > 0 {
			j.raw(",")
		}
		j.newline(2)
		j.value(v, 2)
		if j.err != nil {
			return j.err
		}
		n++
	}
	if n > 0 {
		j.newline(1)
	}
	j.raw("]")
	return j.err
}

// files writes the files as json.Marshal writes a map: keys in order.
func (j *jsonWriter) files(files iter.Seq2[File, error]) error {
	j.key("files", false)
	j.raw("{")
	n, last := 0, ""
	for f, err := range files {
		if err != nil {
			return err
		}
		if n > 0 && f.Path <= last {
			return fmt.Errorf("files out of order: %q after %q", f.Path, last)
		}
		if n > 0 {
			j.raw(",")
		}
		j.newline(2)
		j.str(f.Path)
		if j.pretty {
			j.raw(": ")
		} else {
			j.raw(":")
		}
		j.str(f.Content) // a file can be megabytes: written as it is escaped
		if j.err != nil {
			return j.err
		}
		n, last = n+1, f.Path
	}
	if n > 0 {
		j.newline(1)
	}
	j.raw("}")
	return j.err
}
