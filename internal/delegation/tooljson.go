package delegation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf16"
)

// ToolJSON is a tool definition as deepagents measures it, and as every
// tokenizer here counts it: the OpenAI tool format,
// {"type": "function", "function": {"name", "description", "parameters"}},
// written as Python's json.dumps writes it — ", " and ": " between items,
// every character outside ASCII escaped as \uXXXX. LangChain converts each
// tool with convert_to_openai_tool before counting or sending it, and
// count_tokens_approximately counts the length of that JSON (deepagentsjs
// src/middleware/summarization.ts passes the tools to langchain's
// countTokensApproximately, which stringifies each converted tool). Its
// length in characters is what spec/delegation.md sizes.
func ToolJSON(d ToolDef) string {
	var b strings.Builder
	b.WriteString(`{"type": "function", "function": {"name": `)
	pyString(&b, d.Name)
	b.WriteString(`, "description": `)
	pyString(&b, d.Description)
	b.WriteString(`, "parameters": `)
	params := d.Parameters
	if len(bytes.TrimSpace(params)) == 0 {
		params = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	if err := pyValue(&b, params); err != nil {
		// Parameters are built by this package or checked when the team is
		// built; a bad one is a bug, shown rather than hidden.
		b.WriteString(`"<invalid parameters: ` + err.Error() + `>"`)
	}
	b.WriteString("}}")
	return b.String()
}

// pyValue writes a JSON value the way json.dumps does, keys in their order.
func pyValue(b *strings.Builder, raw json.RawMessage) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := pyNext(b, dec); err != nil {
		return err
	}
	if _, err := dec.Token(); err == nil {
		return fmt.Errorf("more than one value")
	}
	return nil
}

func pyNext(b *strings.Builder, dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch v := tok.(type) {
	case json.Delim:
		closing := "]"
		if v == '{' {
			closing = "}"
		}
		b.WriteRune(rune(v))
		for first := true; dec.More(); first = false {
			if !first {
				b.WriteString(", ")
			}
			if v == '{' {
				key, err := dec.Token()
				if err != nil {
					return err
				}
				pyString(b, key.(string))
				b.WriteString(": ")
			}
			if err := pyNext(b, dec); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return err
		}
		b.WriteString(closing)
	case string:
		pyString(b, v)
	case json.Number:
		b.WriteString(v.String())
	case bool:
		if v {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case nil:
		b.WriteString("null")
	}
	return nil
}

// pyString writes a string as json.dumps does with ensure_ascii (its
// default): \" \\ \n \r \t \b \f, every other character outside the
// printable ASCII range (space to ~) as \uXXXX, characters beyond the BMP as
// surrogate pairs.
func pyString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20 || (r > 0x7e && r <= 0xffff):
				fmt.Fprintf(b, `\u%04x`, r)
			case r > 0xffff:
				r1, r2 := utf16.EncodeRune(r)
				fmt.Fprintf(b, `\u%04x\u%04x`, r1, r2)
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}
