package remote

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
)

// An endpoint may echo the operator's key inside an answer: in its text,
// its reasoning, a tool call's arguments. The answer is recorded (the
// database, the exports), so the key is redacted there too, by RedactKey's
// rule: the key itself, not whatever merely looks like one, which is the
// model's to say.

// apiKey is the key the endpoint's calls carry ("" for none).
func (ep *Endpoint) apiKey() string {
	if ep == nil || ep.key == nil {
		return ""
	}
	return ep.key()
}

// KeyHold is a hold (NewKeyHold) for one channel of this endpoint's
// streamed answer: a text whose deltas go out as they come.
func (ep *Endpoint) KeyHold() *KeyHold { return NewKeyHold(ep.apiKey()) }

// RedactAnswer redacts the key from an answer as the engine records it.
func (ep *Endpoint) RedactAnswer(r *delegation.Response) { RedactResponse(r, ep.apiKey()) }

// RedactResponse redacts key from an answer's text, reasoning, tool calls
// (arguments, names, ids) and what the endpoint said of it. Arguments stay
// JSON: the placeholder has no quote and no backslash.
func RedactResponse(r *delegation.Response, key string) {
	if r == nil || key == "" {
		return
	}
	text := func(s string) string { return string(RedactKey([]byte(s), key)) }
	r.Content, r.Reasoning = text(r.Content), text(r.Reasoning)
	for i := range r.ToolCalls {
		tc := &r.ToolCalls[i]
		tc.ID, tc.Name = text(tc.ID), text(tc.Name)
		tc.Args = RedactKeyJSON(tc.Args, key)
	}
	if m := r.Meta; m != nil {
		m.ID, m.Model = text(m.ID), text(m.Model)
	}
}

// RedactKeyJSON is RedactKey for JSON text, whose strings may also write
// the key's characters escaped ("\u0073k-…"), as the text a tool then
// reads (a file written) would carry it unescaped. JSON stays JSON; only a
// text whose decoded strings held the key is written again.
func RedactKeyJSON(b []byte, key string) []byte {
	b = RedactKey(b, key)
	if key == "" || !bytes.Contains(b, []byte(`\`)) {
		return b
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil || d.More() {
		return b
	}
	v, changed := redactValue(v, key)
	if !changed {
		return b
	}
	var out bytes.Buffer
	e := json.NewEncoder(&out)
	e.SetEscapeHTML(false)
	if e.Encode(v) != nil {
		return b
	}
	return bytes.TrimRight(out.Bytes(), "\n")
}

// redactValue redacts key from every string of a decoded JSON value, its
// members' names too.
func redactValue(v any, key string) (any, bool) {
	switch x := v.(type) {
	case string:
		if strings.Contains(x, key) {
			return strings.ReplaceAll(x, key, Redacted), true
		}
	case []any:
		changed := false
		for i := range x {
			var c bool
			x[i], c = redactValue(x[i], key)
			changed = changed || c
		}
		return x, changed
	case map[string]any:
		changed := false
		for k, m := range x {
			m, c := redactValue(m, key)
			if nk := strings.ReplaceAll(k, key, Redacted); nk != k {
				delete(x, k)
				k, c = nk, true
			}
			x[k] = m
			changed = changed || c
		}
		return x, changed
	}
	return v, false
}
