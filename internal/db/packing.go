package db

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

// The events the log stores by reference are read back here, by the same
// functions the writer checks them with (log.go): an event is stored so
// only when these give its bytes again.

// unpackTool reads a tool event back from its assistant message's calls
// and its packed data: the call's position, and for tool.finished how it
// ended.
func unpackTool(typ delegation.EventType, calls []trace.ToolCall, packed []byte) ([]byte, error) {
	var pos, isErr, ms int64
	var err error
	if typ == delegation.EventToolStarted || !bytes.Contains(packed, []byte(",")) {
		pos, err = strconv.ParseInt(string(packed), 10, 64)
	} else {
		_, err = fmt.Sscanf(string(packed), "%d,%d,%d", &pos, &isErr, &ms)
	}
	if err != nil {
		return nil, fmt.Errorf("unreadable %s %q", typ, packed)
	}
	if pos < 0 || pos >= int64(len(calls)) {
		return nil, fmt.Errorf("tool call %d of a message of %d", pos, len(calls))
	}
	c := calls[pos]
	if typ == delegation.EventToolStarted {
		return trace.ToolStartedData(c.ID, c.Name), nil
	}
	return json.Marshal(delegation.ToolFinished{ToolCallID: c.ID, Name: c.Name, IsError: isErr != 0, DurationMS: ms})
}

// contentOf reads a file content by its number, for reading an event
// back: its size, and a function that writes it out (a history is
// megabytes: it is written where it goes, not built first).
type contentOf func(n int64) (size int64, write func(io.Writer) error, err error)

// textOf reads a content whole.
func textOf(content contentOf, n int64) (string, error) {
	size, write, err := content(n)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.Grow(int(size))
	err = write(&b)
	return b.String(), err
}

// packedFile is a file of a packed change: its path and content number,
// or that it was deleted.
type packedFile struct {
	path    string
	n       int64
	deleted bool
}

// unpackFilesChanged reads a files.changed back from its packed files, or
// [from, packed files]: its data as json.Marshal encodes it, written into
// one buffer of its size, each content escaped into it as it is read.
func unpackFilesChanged(packed []byte, content contentOf) ([]byte, error) {
	from, files, err := packedFilesChanged(packed)
	if err != nil {
		return nil, err
	}
	type read struct {
		size  int64
		write func(io.Writer) error
	}
	reads := make([]read, len(files))
	n := 32 + len(from)
	for i, f := range files {
		if !f.deleted {
			if reads[i].size, reads[i].write, err = content(f.n); err != nil {
				return nil, err
			}
		}
		// Room for its escapes too (a history's newlines and quotes are a
		// tenth of it): growing a buffer of megabytes copies it.
		n += 48 + len(f.path) + int(reads[i].size) + int(reads[i].size)/4
	}
	var b bytes.Buffer // a bytes.Buffer does not fail
	b.Grow(n)
	b.WriteString("{")
	if from != "" {
		b.WriteString(`"from":`)
		_ = trace.WriteJSONString(&b, from)
		b.WriteString(",")
	}
	b.WriteString(`"changes":`)
	if files == nil {
		b.WriteString("null")
	} else {
		b.WriteString("[")
		for i, f := range files {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(`{"path":`)
			_ = trace.WriteJSONString(&b, f.path)
			if reads[i].size > 0 {
				b.WriteString(`,"content":"`)
				w := &trace.JSONStringWriter{W: &b}
				if err := reads[i].write(w); err != nil {
					return nil, err
				}
				_ = w.Close()
				b.WriteString(`"`)
			}
			if f.deleted {
				b.WriteString(`,"deleted":true`)
			}
			b.WriteString("}")
		}
		b.WriteString("]")
	}
	b.WriteString("}")
	return b.Bytes(), nil
}

// packedFilesChanged reads a packed files.changed: its from, and its files.
func packedFilesChanged(packed []byte) (string, []packedFile, error) {
	var from string
	raw := json.RawMessage(packed)
	if bytes.HasPrefix(packed, []byte(`["`)) {
		var p [2]json.RawMessage
		if err := json.Unmarshal(packed, &p); err != nil {
			return "", nil, err
		}
		if err := json.Unmarshal(p[0], &from); err != nil {
			return "", nil, err
		}
		raw = p[1]
	}
	files, err := unpackFiles(raw)
	return from, files, err
}

// unpackSessionStarted reads a session.started back from [its data but
// files, packed files].
func unpackSessionStarted(packed []byte, content contentOf) ([]byte, error) {
	var p [2]json.RawMessage
	if err := json.Unmarshal(packed, &p); err != nil {
		return nil, err
	}
	var d delegation.SessionStarted
	if err := json.Unmarshal(p[0], &d); err != nil {
		return nil, err
	}
	files, err := unpackFiles(p[1])
	if err != nil {
		return nil, err
	}
	if files != nil {
		d.Files = make(map[string]string, len(files))
		for _, f := range files {
			if f.deleted {
				continue
			}
			if d.Files[f.path], err = textOf(content, f.n); err != nil {
				return nil, err
			}
		}
	}
	return json.Marshal(d)
}

// unpackFiles reads packed files ([[path, content number], …], null for a
// deleted file); null is no changes at all (nil).
func unpackFiles(raw json.RawMessage) ([]packedFile, error) {
	if string(raw) == "null" {
		return nil, nil
	}
	var packed [][2]json.RawMessage
	if err := json.Unmarshal(raw, &packed); err != nil {
		return nil, err
	}
	out := make([]packedFile, len(packed))
	for i, p := range packed {
		if err := json.Unmarshal(p[0], &out[i].path); err != nil {
			return nil, err
		}
		if string(p[1]) == "null" {
			out[i].deleted = true
			continue
		}
		var err error
		if out[i].n, err = strconv.ParseInt(string(p[1]), 10, 64); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// unpackAgentStarted reads an agent.started back from its agent's row.
func unpackAgentStarted(a *agentRow) ([]byte, error) {
	return json.Marshal(a.started())
}
