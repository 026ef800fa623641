package db

import (
	"database/sql/driver"
	"fmt"

	"github.com/delegationstudio/studio/internal/delegation"
)

// typeCodes are the numbers the log stores event types by (a name costs up
// to 19 bytes a row, a number one). They are part of the file format:
// never renumber one; a new type takes the next number, and a type without
// one is stored by its name.
var typeCodes = map[delegation.EventType]int64{
	delegation.EventSessionStarted:     1,
	delegation.EventSessionFinished:    2,
	delegation.EventAgentStarted:       3,
	delegation.EventAgentFinished:      4,
	delegation.EventModelStarted:       5,
	delegation.EventModelFinished:      6,
	delegation.EventMessageAdded:       7,
	delegation.EventToolStarted:        8,
	delegation.EventToolFinished:       9,
	delegation.EventDelegationStarted:  10,
	delegation.EventDelegationFinished: 11,
	delegation.EventDelegationRefused:  12,
	delegation.EventSummarization:      13,
	delegation.EventFilesChanged:       14,
	delegation.EventTodosChanged:       15,
	delegation.EventSpanReceived:       16,
}

var codeTypes = func() map[int64]delegation.EventType {
	out := make(map[int64]delegation.EventType, len(typeCodes))
	for t, c := range typeCodes {
		out[c] = t
	}
	return out
}()

func eventType(name string) delegation.EventType { return delegation.EventType(name) }

// Messages' roles and model calls' purposes are stored by code too; a
// value without one by its name.
var (
	roleCodes    = map[string]int64{"user": 1, "assistant": 2, "tool": 3}
	purposeCodes = map[string]int64{"turn": 1, "summary": 2}
)

// coded is a name as stored: its code, when it has one.
func coded(codes map[string]int64, name string) dyn {
	if c, ok := codes[name]; ok {
		return dyn{lite: c, pg: name}
	}
	return dyn{lite: name, pg: name}
}

// dyn is a value SQLite stores in one of two forms in an untyped column (a
// code or a name; an index or an id): lite is SQLite's, and pg the name
// PostgreSQL holds (pgConn): in its typed column, or as it spells the same.
type dyn struct {
	lite, pg any
}

func (d dyn) Value() (driver.Value, error) { return d.lite, nil }

// codedName reads a stored name back: a code or a name.
type codedName struct {
	codes map[string]int64
	out   *string
}

func (c codedName) Scan(v any) error {
	switch x := v.(type) {
	case int64:
		for name, code := range c.codes {
			if code == x {
				*c.out = name
				return nil
			}
		}
		return fmt.Errorf("unknown code %d", x)
	case string:
		*c.out = x
	case []byte:
		*c.out = string(x)
	case nil:
		*c.out = ""
	default:
		return fmt.Errorf("unreadable name %v", v)
	}
	return nil
}
