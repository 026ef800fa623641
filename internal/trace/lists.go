package trace

// ContextOf resolves a call's context against lists made once by Lists, for
// a view that resolves many calls.
func ContextOf(lists map[string][]Message, call ModelCall) []Message {
	var out []Message
	for _, r := range call.Context {
		list := lists[r.AgentID]
		if r.From < 0 || r.To > len(list) || r.From > r.To {
			continue // a trace from Parse never has one; a view must not panic on it
		}
		out = append(out, list[r.From:r.To]...)
	}
	return out
}

// Lists returns each agent's message list: its messages in the order they
// were added.
func Lists(t *Trace) map[string][]Message {
	lists := map[string][]Message{}
	for _, m := range t.Messages {
		lists[m.AgentID] = append(lists[m.AgentID], m)
	}
	return lists
}
