package db

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// A session's log is stored as blocks of consecutive events, each block
// one row of the log table (first seq, count, the time of its last event,
// the encoded events). A row per event cost more than most events say:
// the key, the type's name, the agent's id, an absolute time. In a block an
// event is, one after the other:
//
//	type   uvarint: its code (codes.go), or 0 then its name (uvarint length, bytes)
//	agent  uvarint: 0 none, 1 then its id (uvarint length, bytes), n+2 the session's n-th agent (agents.n)
//	at     varint: nanoseconds after the event before it (the block's first: after its row's prev_at)
//	ref    uvarint: 0 none, else the place of the row it restates, plus one
//	data   uvarint: 0 none, else its length plus one, then its bytes
//
// Its seq is the block's first plus its place in the block. About seven
// bytes an event, against thirty and more as a row of its own.

// blockSize is the encoded size past which a block takes no more events: a
// block and its row fit in a page (no overflow), a few to a page, and
// appending to the last block rewrites little.
const blockSize = 960

// entry is one event as the log stores it. agent is the agent's id; agentN
// its number among the session's agents, -1 when it has none (a received
// event naming an agent that never started) or the event has no agent.
type entry struct {
	code    int64  // 0: name
	name    string // the type's name, when it has no code
	agent   string
	agentN  int
	at      int64 // nanoseconds after the session's created_at
	ref     int64
	hasRef  bool
	data    []byte
	hasData bool
}

// appendEntry encodes e after an event at prevAt.
func appendEntry(b []byte, e *entry, prevAt int64) []byte {
	b = binary.AppendUvarint(b, uint64(e.code))
	if e.code == 0 {
		b = appendBytes(b, []byte(e.name))
	}
	switch {
	case e.agent == "":
		b = binary.AppendUvarint(b, 0)
	case e.agentN < 0:
		b = binary.AppendUvarint(b, 1)
		b = appendBytes(b, []byte(e.agent))
	default:
		b = binary.AppendUvarint(b, uint64(e.agentN)+2)
	}
	b = binary.AppendVarint(b, e.at-prevAt)
	if e.hasRef {
		b = binary.AppendUvarint(b, uint64(e.ref)+1)
	} else {
		b = binary.AppendUvarint(b, 0)
	}
	if e.hasData {
		b = binary.AppendUvarint(b, uint64(len(e.data))+1)
		b = append(b, e.data...)
	} else {
		b = binary.AppendUvarint(b, 0)
	}
	return b
}

func appendBytes(b, s []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

var errBlock = errors.New("damaged log block")

// decodeEntries decodes a block's events; prevAt is the time its first is
// after, agentIDs the session's agents by number.
func decodeEntries(b []byte, prevAt int64, agentIDs []string) ([]entry, error) {
	var out []entry
	at := prevAt
	for len(b) > 0 {
		var e entry
		var ok bool
		var v uint64
		if v, b, ok = uvarint(b); !ok {
			return nil, errBlock
		}
		e.code = int64(v)
		if e.code == 0 {
			var name []byte
			if name, b, ok = bytesOf(b); !ok {
				return nil, errBlock
			}
			e.name = string(name)
		}
		if v, b, ok = uvarint(b); !ok {
			return nil, errBlock
		}
		switch {
		case v == 0:
			e.agentN = -1
		case v == 1:
			var id []byte
			if id, b, ok = bytesOf(b); !ok {
				return nil, errBlock
			}
			e.agent, e.agentN = string(id), -1
		default:
			n := int(v - 2)
			if n >= len(agentIDs) {
				return nil, fmt.Errorf("%w: agent %d of %d", errBlock, n, len(agentIDs))
			}
			e.agent, e.agentN = agentIDs[n], n
		}
		d, n := binary.Varint(b)
		if n <= 0 {
			return nil, errBlock
		}
		b = b[n:]
		at += d
		e.at = at
		if v, b, ok = uvarint(b); !ok {
			return nil, errBlock
		}
		if v > 0 {
			e.ref, e.hasRef = int64(v-1), true
		}
		if v, b, ok = uvarint(b); !ok {
			return nil, errBlock
		}
		if v > 0 {
			l := int(v - 1)
			if l > len(b) {
				return nil, errBlock
			}
			e.data, e.hasData, b = b[:l:l], true, b[l:]
		}
		out = append(out, e)
	}
	return out, nil
}

func uvarint(b []byte) (uint64, []byte, bool) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, b, false
	}
	return v, b[n:], true
}

func bytesOf(b []byte) ([]byte, []byte, bool) {
	l, rest, ok := uvarint(b)
	if !ok || l > uint64(len(rest)) {
		return nil, b, false
	}
	return rest[:l:l], rest[l:], true
}
