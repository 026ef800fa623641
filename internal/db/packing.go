package db

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

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

// unpackFilesChanged reads a files.changed back from its packed files, or
// [from, packed files].
func unpackFilesChanged(packed []byte, content func(int64) (string, error)) ([]byte, error) {
	var d delegation.FilesChanged
	files := json.RawMessage(packed)
	if bytes.HasPrefix(packed, []byte(`["`)) {
		var p [2]json.RawMessage
		if err := json.Unmarshal(packed, &p); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(p[0], &d.From); err != nil {
			return nil, err
		}
		files = p[1]
	}
	changes, err := unpackFiles(files, content)
	if err != nil {
		return nil, err
	}
	d.Changes = changes
	return json.Marshal(d)
}

// unpackSessionStarted reads a session.started back from [its data but
// files, packed files].
func unpackSessionStarted(packed []byte, content func(int64) (string, error)) ([]byte, error) {
	var p [2]json.RawMessage
	if err := json.Unmarshal(packed, &p); err != nil {
		return nil, err
	}
	var d delegation.SessionStarted
	if err := json.Unmarshal(p[0], &d); err != nil {
		return nil, err
	}
	changes, err := unpackFiles(p[1], content)
	if err != nil {
		return nil, err
	}
	if changes != nil {
		d.Files = make(map[string]string, len(changes))
		for _, c := range changes {
			d.Files[c.Path] = c.Content
		}
	}
	return json.Marshal(d)
}

// unpackFiles reads packed files ([[path, content number], …], null for a
// deleted file) as changes; null is no changes at all (nil).
func unpackFiles(raw json.RawMessage, content func(int64) (string, error)) ([]delegation.FileChange, error) {
	if string(raw) == "null" {
		return nil, nil
	}
	var packed [][2]json.RawMessage
	if err := json.Unmarshal(raw, &packed); err != nil {
		return nil, err
	}
	out := make([]delegation.FileChange, len(packed))
	for i, p := range packed {
		if err := json.Unmarshal(p[0], &out[i].Path); err != nil {
			return nil, err
		}
		if string(p[1]) == "null" {
			out[i].Deleted = true
			continue
		}
		n, err := strconv.ParseInt(string(p[1]), 10, 64)
		if err != nil {
			return nil, err
		}
		if out[i].Content, err = content(n); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// unpackAgentStarted reads an agent.started back from its agent's row.
func unpackAgentStarted(a *agentRow) ([]byte, error) {
	return json.Marshal(a.started())
}
