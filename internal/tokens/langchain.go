package tokens

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The articles' counting convention: LangChain's count_tokens_approximately
// (langchain_core.messages.utils, Python), the estimator deepagents uses.
// It counts a whole message, not only its text: per message, the code
// points of its content, its role ("system", "user", "assistant", "tool"),
// an AI message's tool calls as Python's repr writes the list of them, a
// tool message's tool_call_id, and its name; those divided by four and
// rounded up, plus 3 for the message. An empty system message still costs
// its role and its 3: the articles' isolated child, "two messages, 12
// tokens", is an empty system prompt (5) and an 11-character task (7).

// LangChainMessage is one message as count_tokens_approximately reads it.
type LangChainMessage struct {
	Role       string // the OpenAI role: system, user, assistant or tool
	Content    string
	Name       string
	ToolCallID string // a tool message's
	ToolCalls  []LangChainToolCall
}

// LangChainToolCall is one tool call of an AI message: LangChain's ToolCall
// dict, {'name', 'args', 'id', 'type': 'tool_call'}.
type LangChainToolCall struct {
	Name, ID string
	Args     json.RawMessage // a JSON object, as the model wrote it
}

// CountLangChain is count_tokens_approximately of msgs, with its defaults
// (4 characters a token, 3 tokens a message, the name counted).
func CountLangChain(msgs ...LangChainMessage) int {
	total := 0.0
	for _, m := range msgs {
		chars := utf8.RuneCountInString(m.Content)
		if m.Role == "assistant" && len(m.ToolCalls) > 0 {
			chars += utf8.RuneCountInString(PythonToolCalls(m.ToolCalls))
		}
		if m.Role == "tool" {
			chars += utf8.RuneCountInString(m.ToolCallID)
		}
		chars += utf8.RuneCountInString(m.Role) + utf8.RuneCountInString(m.Name)
		total += math.Ceil(float64(chars)/4) + 3
	}
	return int(math.Ceil(total))
}

// PythonToolCalls is repr() of an AI message's tool_calls, as Python
// writes it: [{'name': 'task', 'args': {...}, 'id': 'call_1', 'type': 'tool_call'}].
func PythonToolCalls(calls []LangChainToolCall) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, c := range calls {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("{'name': ")
		b.WriteString(PythonString(c.Name))
		b.WriteString(", 'args': ")
		if err := pythonJSON(&b, c.Args); err != nil {
			b.WriteString("{}") // args that are not JSON: LangChain keeps them as invalid_tool_calls, args {}
		}
		b.WriteString(", 'id': ")
		b.WriteString(PythonString(c.ID))
		b.WriteString(", 'type': 'tool_call'}")
	}
	b.WriteByte(']')
	return b.String()
}

// pythonJSON writes a JSON value as Python's repr writes what json.loads
// made of it: dicts in their order, True, False, None, ints and floats as
// Python prints them.
func pythonJSON(b *strings.Builder, raw json.RawMessage) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		b.WriteString("{}")
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := pythonValue(b, dec); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("more than one JSON value")
	}
	return nil
}

func pythonValue(b *strings.Builder, dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch v := tok.(type) {
	case json.Delim:
		open, end := "{", "}"
		if v == '[' {
			open, end = "[", "]"
		}
		b.WriteString(open)
		for i := 0; dec.More(); i++ {
			if i > 0 {
				b.WriteString(", ")
			}
			if v == '{' {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				b.WriteString(PythonString(k.(string)))
				b.WriteString(": ")
			}
			if err := pythonValue(b, dec); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return err
		}
		b.WriteString(end)
	case string:
		b.WriteString(PythonString(v))
	case json.Number:
		b.WriteString(pythonNumber(string(v)))
	case bool:
		if v {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case nil:
		b.WriteString("None")
	}
	return nil
}

// pythonNumber is a JSON number as Python prints what json.loads made of
// it: an int as written, a float in repr's shortest form (1e-05, 1e+16,
// 0.82, 1.0).
func pythonNumber(s string) string {
	if !strings.ContainsAny(s, ".eE") {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return strconv.FormatInt(n, 10)
		}
		return strings.TrimPrefix(s, "+") // a big int: Python keeps every digit
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return s
	}
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	// Python's repr: the shortest digits; positional when the exponent is
	// in [-5, 16), else scientific with at least two exponent digits.
	exp := 0
	if f != 0 {
		e := strconv.FormatFloat(f, 'e', -1, 64)
		exp, _ = strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	}
	if exp < -4 || exp >= 16 {
		e := strconv.FormatFloat(f, 'e', -1, 64) // 1e-05 → "1e-05", 1e+16 → "1e+16"
		mant, ex, _ := strings.Cut(e, "e")
		sign := ex[0]
		digits := strings.TrimLeft(ex[1:], "0")
		if len(digits) < 2 {
			digits = strings.Repeat("0", 2-len(digits)) + digits
		}
		return mant + "e" + string(sign) + digits
	}
	out := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(out, ".") {
		out += ".0"
	}
	return out
}

// PythonString is repr() of a str: single quotes unless the text holds a
// single quote and no double one; backslash escapes for \\, the quote,
// \n, \r, \t and the characters Python does not print (\xhh, \uhhhh,
// \Uhhhhhhhh); every printable character, any script, as it is.
func PythonString(s string) string {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == rune(q):
			b.WriteByte('\\')
			b.WriteByte(q)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == ' ' || (unicode.IsPrint(r) && r != utf8.RuneError):
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r < 0x10000:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	b.WriteByte(q)
	return b.String()
}
