// Package scripted is the model that plays a scenario's script
// (formats.md §1): a deterministic stand-in for an LLM, so every delegation
// experiment runs without an API key and gives the same trace every time.
//
// Parse checks a scenario's "script" object and New returns a
// delegation.Model that plays it. The main agent plays script.main; the n-th
// start of a subagent plays the n-th list of turns under its name.
package scripted

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
)

// MaxDelay is the longest delay_ms a turn may ask for. A script is a
// demonstration, and a delay of hours would look like a hang.
const MaxDelay = 10 * time.Minute

// Script is a parsed scenario script. It is immutable once parsed, so one
// Script may back any number of Models.
type Script struct {
	hasMain bool
	main    []turn
	subs    map[string][][]turn // subagent name → invocation → turns
	keys    []string
}

type turnKind uint8

const (
	turnPlain turnKind = iota
	turnCases
	turnSummary
)

// turn is one entry of a turn list. A summary turn keeps its text in
// play.content so that playing it is the same code as playing a turn.
type turn struct {
	kind  turnKind
	play  play
	cases []scriptCase
}

// play is what a turn, a case or a summary produces.
type play struct {
	content   string
	toolCalls []toolCall
	delay     time.Duration
}

type toolCall struct {
	id   string // "" means generate one
	name string
	args json.RawMessage
}

type scriptCase struct {
	contains string // "" means no condition
	lacks    string
	play
}

// holds reports whether the case's condition holds for the context.
func (c *scriptCase) holds(ctx *contextText) bool {
	if c.contains != "" && !ctx.has(c.contains) {
		return false
	}
	if c.lacks != "" && ctx.has(c.lacks) {
		return false
	}
	return true
}

// Keys returns the script's agent keys: "main" first when present, then the
// subagent names sorted, so the caller can warn about keys that name no agent
// of the team.
func (s *Script) Keys() []string {
	if s == nil {
		return nil
	}
	return append([]string(nil), s.keys...)
}

// TurnCounts returns how many turns each list under key holds: one count for
// "main", one per invocation for a subagent, nil for a key the script lacks.
func (s *Script) TurnCounts(key string) []int {
	if s == nil {
		return nil
	}
	if key == "main" {
		if !s.hasMain {
			return nil
		}
		return []int{len(s.main)}
	}
	lists, ok := s.subs[key]
	if !ok {
		return nil
	}
	counts := make([]int, len(lists))
	for i, l := range lists {
		counts[i] = len(l)
	}
	return counts
}

// Parse checks a scenario's "script" object (raw JSON; nil, empty or null
// means no script) and returns every problem at once, each tied to its field,
// like "script.main[2].tool_calls[0].name". It checks shapes only: it does
// not know the team, so a key naming no agent is the caller's warning to give.
//
// The returned Script is never nil. When there are problems it still lists
// its Keys, but it must not be played.
func Parse(raw json.RawMessage) (*Script, delegation.FieldErrors) {
	s := &Script{subs: map[string][][]turn{}}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return s, nil
	}
	var p parser
	top, ok := p.object("script", raw, `must be an object: "main" and one entry per subagent, like {"main": [{"content": "Done."}]}`)
	if !ok {
		return s, p.errs
	}
	if v, ok := top["main"]; ok {
		s.hasMain = true
		s.keys = append(s.keys, "main")
		s.main = p.turnList("script.main", v, `must be a list of turns, like [{"content": "Done."}]`)
	}
	for _, k := range slices.Sorted(maps.Keys(top)) {
		if k == "main" {
			continue
		}
		s.keys = append(s.keys, k)
		if strings.TrimSpace(k) == "" {
			p.errs.Add("script", "has an entry with an empty name; each key must be \"main\" or a subagent's name")
			continue
		}
		s.subs[k] = p.invocations("script."+k, k, top[k])
	}
	return s, p.errs
}

type parser struct {
	errs delegation.FieldErrors
}

// object decodes raw as a JSON object, or records a problem with field.
func (p *parser) object(field string, raw json.RawMessage, want string) (map[string]json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if jsonKind(raw) != "an object" || json.Unmarshal(raw, &m) != nil {
		p.errs.Add(field, "%s; got %s", want, jsonKind(raw))
		return nil, false
	}
	return m, true
}

// list decodes raw as a JSON array, or records a problem with field.
func (p *parser) list(field string, raw json.RawMessage, want string) ([]json.RawMessage, bool) {
	var l []json.RawMessage
	if jsonKind(raw) != "a list" || json.Unmarshal(raw, &l) != nil {
		p.errs.Add(field, "%s; got %s", want, jsonKind(raw))
		return nil, false
	}
	return l, true
}

// unknown records every key of m that is not in known: a misspelt key such
// as "delay" would otherwise be ignored without a word.
func (p *parser) unknown(field string, m map[string]json.RawMessage, what string, known ...string) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		found := false
		for _, kk := range known {
			if k == kk {
				found = true
				break
			}
		}
		if !found {
			p.errs.Add(field+"."+k, "unknown field; %s has %s", what, quoteList(known))
		}
	}
}

func (p *parser) turnList(field string, raw json.RawMessage, want string) []turn {
	items, ok := p.list(field, raw, want)
	if !ok {
		return nil
	}
	if len(items) == 0 {
		p.errs.Add(field, `has no turns; add at least one, like {"content": "Done."}`)
		return nil
	}
	turns := make([]turn, len(items))
	for i, item := range items {
		turns[i] = p.turn(fmt.Sprintf("%s[%d]", field, i), item)
	}
	return turns
}

func (p *parser) invocations(field, name string, raw json.RawMessage) [][]turn {
	wrap := fmt.Sprintf(`%q: [[{"content": "…"}]]`, name)
	items, ok := p.list(field, raw, fmt.Sprintf("must be a list with one list of turns per invocation of %q, like %s", name, wrap))
	if !ok {
		return nil
	}
	if len(items) == 0 {
		p.errs.Add(field, "has no lists of turns; add one per invocation of %q, like %s, or remove the entry", name, wrap)
		return nil
	}
	lists := make([][]turn, len(items))
	toldWrap := false
	for i, item := range items {
		f := fmt.Sprintf("%s[%d]", field, i)
		if jsonKind(item) == "an object" {
			// A list of turns where a list of lists belongs is one mistake,
			// not one per turn: say it once.
			if !toldWrap {
				p.errs.Add(f, "must be a list of turns, but it is a turn: each entry of %s is the turns of one invocation of %q; wrap the turns in another list, like %s", field, name, wrap)
				toldWrap = true
			}
			continue
		}
		lists[i] = p.turnList(f, item, fmt.Sprintf("must be the list of turns of invocation %d of %q", i, name))
	}
	return lists
}

const turnNeeds = `a turn needs "content" and/or "tool_calls", or "cases", or "summary"`

func (p *parser) turn(field string, raw json.RawMessage) turn {
	m, ok := p.object(field, raw, `must be a turn: an object with "content" and/or "tool_calls", or "cases", or "summary"`)
	if !ok {
		return turn{}
	}
	p.unknown(field, m, "a turn", "content", "tool_calls", "delay_ms", "cases", "summary")
	_, hasContent := m["content"]
	_, hasCalls := m["tool_calls"]
	_, hasDelay := m["delay_ms"]
	cases, hasCases := m["cases"]
	summary, hasSummary := m["summary"]

	switch {
	case hasSummary:
		if hasContent || hasCalls || hasCases {
			p.errs.Add(field, `a "summary" turn stands alone: it is played only when the engine summarizes; put "content", "tool_calls" or "cases" in a turn of their own`)
			return turn{}
		}
		t := turn{kind: turnSummary}
		t.play.content = p.text(field+".summary", summary, `must be the summary's text`)
		if t.play.content == "" && jsonKind(summary) == "a string" {
			p.errs.Add(field+".summary", "is empty; write the summary the agent should continue from")
		}
		if hasDelay {
			t.play.delay = p.delay(field+".delay_ms", m["delay_ms"])
		}
		return t
	case hasCases:
		if hasContent || hasCalls || hasDelay {
			p.errs.Add(field, `"cases" cannot be combined with "content", "tool_calls" or "delay_ms" in one turn; put them inside each case`)
			return turn{}
		}
		return turn{kind: turnCases, cases: p.cases(field+".cases", cases)}
	case hasContent || hasCalls:
		return turn{play: p.play(field, m, "a turn")}
	default:
		p.errs.Add(field, turnNeeds)
		return turn{}
	}
}

func (p *parser) cases(field string, raw json.RawMessage) []scriptCase {
	items, ok := p.list(field, raw, `must be a list of cases, like [{"when": {"context_contains": "A-7731"}, "content": "A-7731"}, {"content": "fallback"}]`)
	if !ok {
		return nil
	}
	if len(items) == 0 {
		p.errs.Add(field, `has no cases; add at least one, and end with a case without "when" as a fallback`)
		return nil
	}
	out := make([]scriptCase, len(items))
	fallback := -1
	for i, item := range items {
		f := fmt.Sprintf("%s[%d]", field, i)
		m, ok := p.object(f, item, `must be a case: an object with an optional "when" and "content" and/or "tool_calls"`)
		if !ok {
			continue
		}
		if fallback >= 0 {
			p.errs.Add(f, `can never be played: case %d has no "when", so it always holds; put the case without "when" last`, fallback)
		}
		p.unknown(f, m, "a case", "when", "content", "tool_calls", "delay_ms")
		c := &out[i]
		if w, ok := m["when"]; ok {
			c.contains, c.lacks = p.when(f+".when", w)
		} else if fallback < 0 {
			fallback = i
		}
		_, hasContent := m["content"]
		_, hasCalls := m["tool_calls"]
		if !hasContent && !hasCalls {
			p.errs.Add(f, `a case needs "content" and/or "tool_calls"`)
			continue
		}
		c.play = p.play(f, m, "a case")
	}
	return out
}

func (p *parser) when(field string, raw json.RawMessage) (contains, lacks string) {
	m, ok := p.object(field, raw, `must be an object with "context_contains" and/or "context_lacks"`)
	if !ok {
		return "", ""
	}
	p.unknown(field, m, `"when"`, "context_contains", "context_lacks")
	cRaw, hasC := m["context_contains"]
	lRaw, hasL := m["context_lacks"]
	if !hasC && !hasL {
		p.errs.Add(field, `needs "context_contains" and/or "context_lacks"; leave "when" out for a case that always holds`)
		return "", ""
	}
	// An empty needle is in every context, so it would silently make
	// context_contains always hold and context_lacks never hold.
	if hasC {
		contains = p.text(field+".context_contains", cRaw, "must be the text to look for")
		if contains == "" && jsonKind(cRaw) == "a string" {
			p.errs.Add(field+".context_contains", "is empty; give the text to look for")
		}
	}
	if hasL {
		lacks = p.text(field+".context_lacks", lRaw, "must be the text that must be absent")
		if lacks == "" && jsonKind(lRaw) == "a string" {
			p.errs.Add(field+".context_lacks", "is empty; give the text that must be absent")
		}
	}
	return contains, lacks
}

// play reads content, tool_calls and delay_ms of a turn or a case.
func (p *parser) play(field string, m map[string]json.RawMessage, what string) play {
	var pl play
	if raw, ok := m["content"]; ok {
		pl.content = p.text(field+".content", raw, "must be the text the agent says")
	}
	if raw, ok := m["tool_calls"]; ok {
		pl.toolCalls = p.toolCalls(field+".tool_calls", raw)
	}
	if raw, ok := m["delay_ms"]; ok {
		pl.delay = p.delay(field+".delay_ms", raw)
	}
	_, hasCalls := m["tool_calls"]
	// {"content": ""} is allowed on purpose: an empty final message is how a
	// script shows the receipt walking back past it, or an empty receipt.
	if pl.content == "" && hasCalls && jsonKind(m["tool_calls"]) == "a list" && len(pl.toolCalls) == 0 {
		p.errs.Add(field, `%s says nothing: "tool_calls" is empty and there is no "content"`, what)
	}
	return pl
}

func (p *parser) toolCalls(field string, raw json.RawMessage) []toolCall {
	items, ok := p.list(field, raw, `must be a list of tool calls, like [{"name": "read_file", "args": {"file_path": "/a.md"}}]`)
	if !ok {
		return nil
	}
	calls := make([]toolCall, 0, len(items))
	for i, item := range items {
		f := fmt.Sprintf("%s[%d]", field, i)
		m, ok := p.object(f, item, `must be a tool call: {"name": "…", "args": {…}}`)
		if !ok {
			continue
		}
		p.unknown(f, m, "a tool call", "name", "args", "id")
		var tc toolCall
		if raw, ok := m["name"]; ok {
			tc.name = p.text(f+".name", raw, "must be the tool's name")
		}
		if tc.name == "" && (m["name"] == nil || jsonKind(m["name"]) == "a string") {
			p.errs.Add(f+".name", `a tool call needs a "name", like "write_file"`)
		}
		tc.args = json.RawMessage("{}")
		if raw, ok := m["args"]; ok {
			if jsonKind(raw) != "an object" {
				p.errs.Add(f+".args", `must be an object of the tool's arguments, like {"file_path": "/a.md"}; got %s`, jsonKind(raw))
			} else {
				// Compact so the args text the context is searched in, and the
				// trace shows, does not depend on the file's indentation.
				var b bytes.Buffer
				if json.Compact(&b, raw) == nil {
					tc.args = b.Bytes()
				}
			}
		}
		if raw, ok := m["id"]; ok {
			tc.id = p.text(f+".id", raw, "must be a string; leave it out to have one generated")
		}
		calls = append(calls, tc)
	}
	return calls
}

func (p *parser) text(field string, raw json.RawMessage, want string) string {
	var s string
	if jsonKind(raw) != "a string" || json.Unmarshal(raw, &s) != nil {
		p.errs.Add(field, "%s; got %s", want, jsonKind(raw))
		return ""
	}
	return s
}

func (p *parser) delay(field string, raw json.RawMessage) time.Duration {
	var f float64
	if jsonKind(raw) != "a number" || json.Unmarshal(raw, &f) != nil {
		p.errs.Add(field, "must be a number of milliseconds, like 250; got %s", jsonKind(raw))
		return 0
	}
	if f < 0 || f != math.Trunc(f) {
		p.errs.Add(field, "must be a whole number of milliseconds, 0 or more; got %s", string(bytes.TrimSpace(raw)))
		return 0
	}
	if f > float64(MaxDelay/time.Millisecond) {
		p.errs.Add(field, "is %s ms; the most a turn may wait is %d ms", string(bytes.TrimSpace(raw)), MaxDelay/time.Millisecond)
		return 0
	}
	return time.Duration(f) * time.Millisecond
}

// jsonKind names the JSON type of raw the way an error message wants it.
func jsonKind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "true/false"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = `"` + n + `"`
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " and " + q[len(q)-1]
}
