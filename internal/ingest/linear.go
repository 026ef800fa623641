package ingest

import (
	"encoding/json"

	"github.com/delegationstudio/studio/internal/delegation"
)

// The studio's own OTLP export is linear (internal/otlp): a chat span's
// gen_ai.input.messages holds only the messages its agent's list gained
// since that agent's previous call (delegation.inputs "new", their
// positions in delegation.new_ranges), and delegation.context_ranges names
// all the call received, as ranges of the agents' lists. A trace of it is
// read back by filling each agent's list from the new messages and reading
// every call's whole input from its ranges.

// lists are the agents' message lists as a linear export's calls give
// them, by the export's agent id, each message at its index.
type lists map[string]map[int]Message

// linearInput reads a linear export's call: ok is false when the span is
// not one; ready is false when its ranges name messages not seen yet (a
// call of its parent still to come).
func (t *Trace) linearInput(sp *Span, in *CallInput) (ok, ready bool) {
	if attrString(sp.Attrs, "delegation.inputs") != "new" {
		return false, false
	}
	var ctx, fresh []delegation.Range
	if json.Unmarshal([]byte(attrString(sp.Attrs, "delegation.context_ranges")), &ctx) != nil ||
		json.Unmarshal([]byte(attrString(sp.Attrs, "delegation.new_ranges")), &fresh) != nil {
		return false, false
	}
	if t.lists == nil {
		t.lists = lists{}
	}
	k := 0
	for _, r := range fresh {
		list := t.lists[r.AgentID]
		if list == nil {
			list = map[int]Message{}
			t.lists[r.AgentID] = list
		}
		for i := r.From; i < r.To && k < len(in.Input); i++ {
			list[i] = in.Input[k]
			k++
		}
	}
	var whole []Message
	for _, r := range ctx {
		for i := r.From; i < r.To; i++ {
			m, seen := t.lists[r.AgentID][i]
			if !seen {
				return true, false
			}
			whole = append(whole, m)
		}
	}
	in.Input = whole
	// The system prompt is its agent's, written on its first call's span.
	agent := attrString(sp.Attrs, "delegation.agent_id")
	if t.systems == nil {
		t.systems = map[string]string{}
	}
	if in.System != "" {
		t.systems[agent] = in.System
	} else {
		in.System = t.systems[agent]
	}
	return true, true
}
