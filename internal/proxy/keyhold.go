package proxy

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"

	"github.com/delegationstudio/studio/internal/model/remote"
)

// textHolds keeps the operator's key out of a stream whose text channels
// (a choice's content, a tool call's arguments, a content block's text or
// JSON) may carry it split across events: each channel's text goes through
// a remote.KeyHold of its own. An event whose text is neither redacted nor
// held back goes out as it came; one whose text is, is written again with
// the text that may go out. No event waits for the next: only a few
// characters that may be the key's start do.
type textHolds struct {
	key   string
	holds map[string]*remote.KeyHold // by channel
	// kinds are the delta types of Anthropic's channels, for the event
	// that gives their rest.
	kinds map[string]string
	// id and model are the last chat chunk's, for the chunk that gives
	// the rest of a stream that ends without its choices' finish.
	id, model json.RawMessage
}

func newTextHolds(key string) *textHolds {
	return &textHolds{key: key, holds: map[string]*remote.KeyHold{}, kinds: map[string]string{}}
}

// untouched reports whether an event can go out as it came, unread:
// nothing is held, and none of its strings may end with the key's start.
func (t *textHolds) untouched(data []byte) bool {
	if t.key == "" {
		return true
	}
	for _, h := range t.holds {
		if h.Holding() {
			return false
		}
	}
	return !remote.MayEndInKeyStart(data, t.key)
}

func (t *textHolds) hold(ch string) *remote.KeyHold {
	h := t.holds[ch]
	if h == nil {
		h = remote.NewKeyHold(t.key)
		t.holds[ch] = h
	}
	return h
}

// pass puts obj[name], a channel's text, through its hold (all of what is
// held too when final), and reports whether it changed.
func (t *textHolds) pass(obj map[string]any, name, ch string, final bool) bool {
	s, present := obj[name].(string)
	h := t.holds[ch]
	if !present && (!final || h == nil || !h.Holding()) {
		return false
	}
	h = t.hold(ch)
	out := h.Next(s)
	if final {
		out += h.Rest()
	}
	if present && out == s {
		return false
	}
	obj[name] = out
	return true
}

// held are the channels under prefix with text held, in order.
func (t *textHolds) held(prefix string) []string {
	var chs []string
	for ch, h := range t.holds {
		if strings.HasPrefix(ch, prefix) && h.Holding() {
			chs = append(chs, ch)
		}
	}
	sort.Strings(chs)
	return chs
}

func decodeObject(data []byte) (map[string]any, bool) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v map[string]any
	if d.Decode(&v) != nil || v == nil {
		return nil, false
	}
	return v, true
}

func encode(v any) []byte {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if e.Encode(v) != nil {
		return nil
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

// chatTexts are the text fields of a chat chunk's delta.
var chatTexts = [...]string{"content", "reasoning_content", "reasoning", "refusal"}

// chat is a chat chunk with its text made safe. A choice that finishes
// gives all its channels' rest.
func (t *textHolds) chat(data []byte) []byte {
	if t.untouched(data) {
		return data
	}
	v, ok := decodeObject(data)
	if !ok {
		return data
	}
	if id, err := json.Marshal(v["id"]); err == nil && v["id"] != nil {
		t.id = id
	}
	if m, err := json.Marshal(v["model"]); err == nil && v["model"] != nil {
		t.model = m
	}
	changed := false
	choices, _ := v["choices"].([]any)
	for _, c := range choices {
		cm, ok := c.(map[string]any)
		if !ok {
			continue
		}
		changed = t.chatChoice(cm) || changed
	}
	if !changed {
		return data
	}
	return orData(encode(v), data)
}

func orData(b, data []byte) []byte {
	if b == nil {
		return data
	}
	return b
}

func (t *textHolds) chatChoice(cm map[string]any) bool {
	idx := jsonText(cm["index"]) + "/"
	fr, _ := cm["finish_reason"].(string)
	final := fr != ""
	delta, _ := cm["delta"].(map[string]any)
	if delta == nil {
		if !final || len(t.held(idx)) == 0 {
			return false
		}
		delta = map[string]any{}
		cm["delta"] = delta
	}
	changed := false
	for _, f := range chatTexts {
		changed = t.pass(delta, f, idx+f, final) || changed
	}
	calls, _ := delta["tool_calls"].([]any)
	seen := map[string]bool{}
	for _, c := range calls {
		tc, _ := c.(map[string]any)
		fn, _ := tc["function"].(map[string]any)
		if fn == nil {
			continue
		}
		ch := idx + "tool/" + jsonText(tc["index"])
		seen[ch] = true
		changed = t.pass(fn, "arguments", ch, final) || changed
	}
	if fc, ok := delta["function_call"].(map[string]any); ok { // the legacy single call
		changed = t.pass(fc, "arguments", idx+"function_call", final) || changed
	} else if h := t.holds[idx+"function_call"]; final && h != nil && h.Holding() {
		delta["function_call"] = map[string]any{"arguments": h.Rest()}
		changed = true
	}
	if !final {
		return changed
	}
	for _, ch := range t.held(idx + "tool/") {
		if !seen[ch] {
			calls = append(calls, map[string]any{"index": json.Number(strings.TrimPrefix(ch, idx+"tool/")),
				"function": map[string]any{"arguments": t.holds[ch].Rest()}})
			changed = true
		}
	}
	if len(calls) > 0 {
		delta["tool_calls"] = calls
	}
	return changed
}

// chatRest is a chunk that gives what is still held, at the end of a
// stream whose choices did not finish; nil when nothing is.
func (t *textHolds) chatRest() []byte {
	chs := t.held("")
	if len(chs) == 0 {
		return nil
	}
	deltas := map[string]map[string]any{}
	var order []string
	for _, ch := range chs {
		idx, field, _ := strings.Cut(ch, "/")
		d := deltas[idx]
		if d == nil {
			d = map[string]any{}
			deltas[idx] = d
			order = append(order, idx)
		}
		rest := t.holds[ch].Rest()
		if j, ok := strings.CutPrefix(field, "tool/"); ok {
			calls, _ := d["tool_calls"].([]any)
			d["tool_calls"] = append(calls, map[string]any{"index": json.Number(j), "function": map[string]any{"arguments": rest}})
			continue
		}
		if field == "function_call" {
			d[field] = map[string]any{"arguments": rest}
			continue
		}
		d[field] = rest
	}
	choices := make([]any, 0, len(order))
	for _, idx := range order {
		choices = append(choices, map[string]any{"index": json.Number(idx), "delta": deltas[idx]})
	}
	v := map[string]any{"object": "chat.completion.chunk", "choices": choices}
	if t.id != nil {
		v["id"] = t.id
	}
	if t.model != nil {
		v["model"] = t.model
	}
	return encode(v)
}

// messageText is the text field of a kind of Anthropic delta ("" for a
// kind without text).
func messageText(kind string) string {
	switch kind {
	case "text_delta":
		return "text"
	case "input_json_delta":
		return "partial_json"
	case "thinking_delta":
		return "thinking"
	}
	return ""
}

// message is an Anthropic event with its text made safe.
func (t *textHolds) message(data []byte) []byte {
	if t.untouched(data) {
		return data
	}
	v, ok := decodeObject(data)
	if !ok || v["type"] != "content_block_delta" {
		return data
	}
	delta, _ := v["delta"].(map[string]any)
	kind, _ := delta["type"].(string)
	field := messageText(kind)
	if field == "" {
		return data
	}
	ch := jsonText(v["index"])
	t.kinds[ch] = kind
	if !t.pass(delta, field, ch, false) {
		return data
	}
	return orData(encode(v), data)
}

// messageRest are the content_block_delta events that give what is held
// of the block at index (all blocks when index is ""), before the event
// that ends it.
func (t *textHolds) messageRest(index string) [][]byte {
	var out [][]byte
	for _, ch := range t.held("") {
		if index != "" && ch != index {
			continue
		}
		kind := t.kinds[ch]
		out = append(out, encode(map[string]any{"type": "content_block_delta", "index": json.Number(ch),
			"delta": map[string]any{"type": kind, messageText(kind): t.holds[ch].Rest()}}))
	}
	return out
}

// jsonText is a JSON value (an index) as text: a number as written.
func jsonText(v any) string {
	switch x := v.(type) {
	case json.Number:
		return x.String()
	case nil:
		return "0"
	}
	b, _ := json.Marshal(v)
	return string(b)
}
