package i18n

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	goi18n "github.com/nicksnyder/go-i18n/v2/i18n"
	"golang.org/x/text/feature/plural"
)

// fastMessage is a catalogue message whose every plural form is text and
// {{.Field}}s only, each form cut at its fields.
type fastMessage struct {
	forms map[plural.Form][]fastPart
}

// fastPart is a run of text, or a field of the template's data.
type fastPart struct {
	text  string
	field string // "" for text
}

// templateField is a {{.Field}} of a template.
var templateField = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\{\{\s*\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}`) })

// fastMessages are a language's messages the fast path can write.
func fastMessages(code string) map[string]*fastMessage {
	out := map[string]*fastMessage{}
	for _, file := range catalogueMessages(code) {
		for id, m := range file {
			if fm := compileMessage(m); fm != nil {
				out[id] = fm
			}
		}
	}
	return out
}

// compileMessage cuts a message's forms at their fields; nil when one of
// them holds more than text and fields (an {{if}}, a pipeline, other
// delimiters), which only text/template can write.
func compileMessage(m *goi18n.Message) *fastMessage {
	if (m.LeftDelim != "" && m.LeftDelim != "{{") || (m.RightDelim != "" && m.RightDelim != "}}") {
		return nil
	}
	fm := &fastMessage{forms: map[plural.Form][]fastPart{}}
	for form, src := range map[plural.Form]string{plural.Zero: m.Zero, plural.One: m.One, plural.Two: m.Two,
		plural.Few: m.Few, plural.Many: m.Many, plural.Other: m.Other} {
		if src == "" {
			continue
		}
		rest := templateField().ReplaceAllString(src, "")
		if strings.Contains(rest, "{{") || strings.Contains(rest, "}}") {
			return nil
		}
		var parts []fastPart
		last := 0
		for _, loc := range templateField().FindAllStringSubmatchIndex(src, -1) {
			if loc[0] > last {
				parts = append(parts, fastPart{text: src[last:loc[0]]})
			}
			parts = append(parts, fastPart{field: src[loc[2]:loc[3]]})
			last = loc[1]
		}
		if last < len(src) {
			parts = append(parts, fastPart{text: src[last:]})
		}
		fm.forms[form] = parts
	}
	return fm
}

// write writes the message's form with the data given as name, value
// pairs (the last of a name counts, as in a map) and one more pair,
// extra; ok is false when the message has no such form (go-i18n then says
// why).
func (m *fastMessage) write(form plural.Form, kv []any, extraName, extraValue string) (string, bool) {
	parts, ok := m.forms[form]
	if !ok {
		return "", false
	}
	if len(parts) == 1 && parts[0].field == "" {
		return parts[0].text, true
	}
	var b strings.Builder
	for _, p := range parts {
		if p.field == "" {
			b.WriteString(p.text)
			continue
		}
		if p.field == extraName && extraName != "" {
			b.WriteString(extraValue)
			continue
		}
		v, found := valueOf(kv, p.field)
		if !found {
			b.WriteString("<no value>") // what text/template writes for a missing key of a map
			continue
		}
		switch v := v.(type) {
		case string:
			b.WriteString(v)
		case Data:
			b.WriteString(string(v))
		default:
			fmt.Fprint(&b, v)
		}
	}
	return b.String(), true
}

// valueOf is the value of a name in name, value pairs: the last one.
func valueOf(kv []any, name string) (any, bool) {
	for i := len(kv)&^1 - 2; i >= 0; i -= 2 {
		if k, ok := kv[i].(string); ok && k == name {
			return kv[i+1], true
		} else if !ok && fmt.Sprint(kv[i]) == name {
			return kv[i+1], true
		}
	}
	return nil, false
}
