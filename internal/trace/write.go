package trace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"strings"
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
	jw.field("scenario", scenario, false)
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
		j.value(f.Path, 2)
		if j.pretty {
			j.raw(": ")
		} else {
			j.raw(":")
		}
		j.value(f.Content, 2)
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
