package schema

import (
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

var printer = message.NewPrinter(language.English)

// leaf is one problem found in the validator's error tree.
type leaf struct {
	at      []string // where the error was raised: the object, for a missing or unknown field
	loc     []string // the field the problem is about
	msg     string
	unknown string   // an unknown field's name
	known   []string // for an unknown field: the fields allowed beside it
}

// reporter turns a *jsonschema.ValidationError tree into FieldErrors.
type reporter struct {
	schema *compiled
	doc    any // the instance
}

func withTok(loc []string, tok string) []string {
	return append(slices.Clone(loc), tok)
}

// collect walks the error tree down to its leaf causes. A oneOf or anyOf is
// collapsed into the best branch's problems or one message (see collapse).
func (r *reporter) collect(e *jsonschema.ValidationError) []leaf {
	L := e.InstanceLocation
	switch k := e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.Reference, *kind.AllOf:
		if len(e.Causes) == 0 {
			return []leaf{{at: L, loc: L, msg: k.LocalizedString(printer)}}
		}
		var out []leaf
		for _, c := range e.Causes {
			out = append(out, r.collect(c)...)
		}
		return out
	case *kind.OneOf:
		if k.Subschemas != nil {
			return []leaf{{at: L, loc: L, msg: "matches more than one of the forms allowed here; it must match exactly one"}}
		}
		return r.collapse(e)
	case *kind.AnyOf:
		return r.collapse(e)
	case *kind.Required:
		out := make([]leaf, 0, len(k.Missing))
		for _, m := range k.Missing {
			out = append(out, leaf{at: L, loc: withTok(L, m), msg: fmt.Sprintf("missing required field %q", m)})
		}
		return out
	case *kind.AdditionalProperties:
		out := make([]leaf, 0, len(k.Properties))
		if r.isDef(e.SchemaURL, "/$defs/files") { // keys are paths: ^/
			for _, p := range k.Properties {
				msg := fmt.Sprintf("file path %q must be absolute: start it with \"/\", e.g. %q",
					p, "/"+strings.TrimLeft(p, "./"))
				out = append(out, leaf{at: L, loc: withTok(L, p), msg: msg})
			}
			return out
		}
		known := r.knownFields(e.SchemaURL)
		for _, p := range k.Properties {
			out = append(out, leaf{at: L, loc: withTok(L, p), unknown: p, known: known})
		}
		return out
	case *kind.PropertyNames:
		// Not used by these schemas: the library reuses the slice behind
		// this error's InstanceLocation, so write file names' rules with
		// patternProperties instead.
		return []leaf{{at: L, loc: L, msg: fmt.Sprintf("field name %q is not allowed here", k.Property)}}
	default:
		return []leaf{{at: L, loc: L, msg: r.describe(e)}}
	}
}

// collapse reports a failed oneOf/anyOf. Each branch is one form the value
// could take; listing why every form failed is noise. If one branch clearly
// matched better — its only trouble at the value itself is unknown fields
// that no branch allows, or, failing that, it is the only one whose trouble
// there is nothing but unknown fields — its problems are reported. Otherwise
// the value gets one message saying what forms it may take, plus the fields
// that no form allows.
func (r *reporter) collapse(e *jsonschema.ValidationError) []leaf {
	L := e.InstanceLocation
	branches := make([][]leaf, len(e.Causes))
	for i, c := range e.Causes {
		branches[i] = r.collect(c)
	}

	var universal map[string]bool // unknown fields at L that no branch allows
	for i, b := range branches {
		set := map[string]bool{}
		for _, l := range b {
			if l.unknown != "" && slices.Equal(l.at, L) {
				set[l.unknown] = true
			}
		}
		if i == 0 {
			universal = set
			continue
		}
		for name := range universal {
			if !set[name] {
				delete(universal, name)
			}
		}
	}

	// pick returns the branch with the fewest problems among those whose
	// problems at L all satisfy ok, and how many branches qualify.
	pick := func(ok func(leaf) bool) (best, n int) {
		best = -1
		for i, b := range branches {
			fine := len(b) > 0
			for _, l := range b {
				if slices.Equal(l.at, L) && !ok(l) {
					fine = false
					break
				}
			}
			if fine {
				n++
				if best < 0 || len(b) < len(branches[best]) {
					best = i
				}
			}
		}
		return best, n
	}
	if i, _ := pick(func(l leaf) bool { return l.unknown != "" && universal[l.unknown] }); i >= 0 {
		return branches[i]
	}
	if i, n := pick(func(l leaf) bool { return l.unknown != "" }); n == 1 {
		return branches[i]
	}

	var out []leaf
	names := make([]string, 0, len(universal))
	for name := range universal {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		var known []string
		for _, b := range branches {
			for _, l := range b {
				if l.unknown == name && slices.Equal(l.at, L) {
					known = append(known, l.known...)
				}
			}
		}
		slices.Sort(known)
		out = append(out, leaf{at: L, loc: withTok(L, name), unknown: name, known: slices.Compact(known)})
	}
	return append(out, leaf{at: L, loc: L, msg: r.noMatch(e, branches)})
}

// noMatch is the one message for a value that matches none of its forms.
func (r *reporter) noMatch(e *jsonschema.ValidationError, branches [][]leaf) string {
	v, _ := valueAt(r.doc, e.InstanceLocation)
	switch {
	case r.isDef(e.SchemaURL, "/$defs/turn"), r.isDef(e.SchemaURL, "/$defs/messageTurn"):
		return turnMessage(v)
	case r.isDef(e.SchemaURL, "/$defs/case"):
		return `a case needs "content" and/or "tool_calls" (with an optional "when" and "delay_ms")`
	}
	// A choice between required fields: say which.
	var fields []string
	for _, b := range branches {
		for _, l := range b {
			if !strings.HasPrefix(l.msg, "missing required field") {
				return "does not match any of the forms allowed here"
			}
			fields = append(fields, strconv.Quote(l.loc[len(l.loc)-1]))
		}
	}
	return "needs at least one of the fields " + strings.Join(slices.Compact(fields), ", ")
}

// turnMessage explains what a scripted turn may be.
func turnMessage(v any) string {
	const forms = `"content" and/or "tool_calls", or "cases", or "summary"`
	obj, _ := v.(map[string]any)
	var present []string
	kinds := 0
	for _, group := range [][]string{{"content", "tool_calls"}, {"cases"}, {"summary"}} {
		found := false
		for _, k := range group {
			if _, ok := obj[k]; ok {
				present = append(present, strconv.Quote(k))
				found = true
			}
		}
		if found {
			kinds++
		}
	}
	if kinds > 1 {
		return fmt.Sprintf("a turn is one kind only: %s; this one has %s", forms, joinAnd(present))
	}
	return "a turn needs " + forms
}

func joinAnd(items []string) string {
	if len(items) <= 1 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// describe writes a leaf error other than a missing or unknown field.
func (r *reporter) describe(e *jsonschema.ValidationError) string {
	v, _ := valueAt(r.doc, e.InstanceLocation)
	switch k := e.ErrorKind.(type) {
	case *kind.Type:
		want := make([]string, len(k.Want))
		for i, t := range k.Want {
			want[i] = typeName(t)
		}
		return fmt.Sprintf("must be %s, not %s", strings.Join(want, " or "), display(v))
	case *kind.Const:
		switch {
		case r.isDef(e.SchemaURL, "/properties/version") && r.schema.id == TraceID:
			return fmt.Sprintf("unsupported trace version %s: this studio reads version %s", display(v), display(k.Want))
		case r.isDef(e.SchemaURL, "/properties/format") && r.schema.id == TraceID:
			return fmt.Sprintf("must be %s, not %s: this is not a Delegation Studio trace", display(k.Want), display(v))
		}
		return fmt.Sprintf("must be %s, not %s", display(k.Want), display(v))
	case *kind.Enum:
		want := make([]string, len(k.Want))
		var names []string
		for i, w := range k.Want {
			want[i] = display(w)
			if s, ok := w.(string); ok {
				names = append(names, s)
			}
		}
		msg := fmt.Sprintf("must be one of %s, not %s", strings.Join(want, ", "), display(v))
		if len(want) == 1 {
			msg = fmt.Sprintf("must be %s, not %s", want[0], display(v))
		}
		if s, ok := v.(string); ok {
			if m := suggest(s, names); m != "" {
				msg += fmt.Sprintf("; did you mean %q?", m)
			}
		}
		return msg
	case *kind.MinLength:
		if k.Want == 1 {
			return "must not be empty"
		}
		return fmt.Sprintf("must be at least %d characters long", k.Want)
	case *kind.MaxLength:
		return fmt.Sprintf("must be at most %d characters long, not %d", k.Want, k.Got)
	case *kind.Minimum:
		return fmt.Sprintf("must be at least %s, not %s", ratString(k.Want), display(v))
	case *kind.Maximum:
		return fmt.Sprintf("must be at most %s, not %s", ratString(k.Want), display(v))
	case *kind.ExclusiveMinimum:
		return fmt.Sprintf("must be greater than %s, not %s", ratString(k.Want), display(v))
	case *kind.ExclusiveMaximum:
		return fmt.Sprintf("must be less than %s, not %s", ratString(k.Want), display(v))
	case *kind.MinItems:
		if r.isDef(e.SchemaURL, "/$defs/casesTurn/properties/cases") {
			return "needs at least one case"
		}
		if k.Want == 1 {
			return "must not be empty"
		}
		return fmt.Sprintf("must have at least %d items, not %d", k.Want, k.Got)
	case *kind.MaxItems:
		return fmt.Sprintf("must have at most %d items, not %d", k.Want, k.Got)
	case *kind.Pattern:
		return fmt.Sprintf("%s does not match the pattern %q", display(k.Got), k.Want)
	case *kind.Format:
		msg := fmt.Sprintf("%s is not a valid %s", display(k.Got), k.Want)
		if k.Want == "date-time" {
			return msg + `: write an RFC 3339 time, e.g. "2025-01-02T15:04:05Z"`
		}
		if le, ok := k.Err.(interface{ LocalizedError(*message.Printer) string }); ok {
			return msg + ": " + le.LocalizedError(printer)
		}
		if k.Err != nil {
			return msg + ": " + k.Err.Error()
		}
		return msg
	case *kind.FalseSchema:
		return "is not allowed here"
	}
	return e.ErrorKind.LocalizedString(printer)
}

func typeName(t string) string {
	switch t {
	case "object":
		return "an object"
	case "array":
		return "an array"
	case "string":
		return "a string"
	case "integer":
		return "a whole number"
	case "number":
		return "a number"
	case "boolean":
		return "true or false"
	}
	return t
}

// display shows a value in a message: scalars as JSON, containers by type.
func display(v any) string {
	switch s := v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		if r := []rune(s); len(r) > 40 {
			v = string(r[:37]) + "..."
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func ratString(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	return r.FloatString(6)
}

// isDef reports whether a schema location is fragment frag of this schema.
func (r *reporter) isDef(schemaURL, frag string) bool {
	return schemaURL == r.schema.id+"#"+frag
}

// knownFields lists the properties the schema at schemaURL declares.
func (r *reporter) knownFields(schemaURL string) []string {
	base, frag, _ := strings.Cut(schemaURL, "#")
	if base != r.schema.id {
		return nil
	}
	cur := r.schema.raw
	if frag != "" {
		for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			m, ok := cur.(map[string]any)
			if !ok {
				return nil
			}
			cur = m[tok]
		}
	}
	m, _ := cur.(map[string]any)
	props, _ := m["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// unknownMessage writes the message for a field the schema does not allow.
func unknownMessage(name string, known []string) string {
	msg := fmt.Sprintf("unknown field %q", name)
	if m := suggest(name, known); m != "" {
		return msg + fmt.Sprintf("; did you mean %q?", m)
	}
	if len(known) > 0 {
		q := make([]string, len(known))
		for i, k := range known {
			q[i] = strconv.Quote(k)
		}
		return msg + "; the fields allowed here are " + strings.Join(q, ", ")
	}
	return msg
}

// suggest returns the candidate closest in spelling to name, if one is close
// enough to be a likely typo: an edit distance of at most 2 (1 for names of
// four letters or fewer), ignoring case, "_" and "-"; or a name of four
// letters or more that a candidate starts with.
func suggest(name string, candidates []string) string {
	limit := 2
	if len([]rune(name)) <= 4 {
		limit = 1
	}
	norm := func(s string) string {
		return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(s))
	}
	best, bestD := "", limit+1
	for _, c := range candidates {
		if c == name {
			continue
		}
		d := editDistance(strings.ToLower(name), strings.ToLower(c))
		if norm(name) == norm(c) {
			d = 0
		} else if n := norm(name); len(n) >= 4 && strings.HasPrefix(norm(c), n) {
			d = limit // "delay" for "delay_ms": a likely short form
		}
		if d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the optimal-string-alignment distance: insertions,
// deletions, substitutions and swaps of neighbours each cost one.
func editDistance(a, b string) int {
	s, t := []rune(a), []rune(b)
	d := make([][]int, len(s)+1)
	for i := range d {
		d[i] = make([]int, len(t)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(s); i++ {
		for j := 1; j <= len(t); j++ {
			cost := 1
			if s[i-1] == t[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && s[i-1] == t[j-2] && s[i-2] == t[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(s)][len(t)]
}

// fieldErrors renders leaves as FieldErrors, de-duplicated and sorted by
// field (array indexes in numeric order), then message.
func (r *reporter) fieldErrors(leaves []leaf) []FieldError {
	type item struct {
		loc []string
		fe  FieldError
	}
	items := make([]item, 0, len(leaves))
	seen := map[FieldError]bool{}
	for _, l := range leaves {
		msg := l.msg
		if l.unknown != "" {
			msg = unknownMessage(l.unknown, l.known)
		}
		if len(l.loc) == 0 && strings.HasPrefix(msg, "must ") {
			msg = "the document " + msg
		}
		fe := FieldError{Field: fieldPath(r.doc, l.loc), Message: msg}
		if seen[fe] {
			continue
		}
		seen[fe] = true
		items = append(items, item{l.loc, fe})
	}
	sort.SliceStable(items, func(i, j int) bool {
		if c := compareLoc(items[i].loc, items[j].loc); c != 0 {
			return c < 0
		}
		return items[i].fe.Message < items[j].fe.Message
	})
	out := make([]FieldError, len(items))
	for i, it := range items {
		out[i] = it.fe
	}
	return out
}

func compareLoc(a, b []string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] == b[i] {
			continue
		}
		x, errx := strconv.Atoi(a[i])
		y, erry := strconv.Atoi(b[i])
		if errx == nil && erry == nil {
			return x - y
		}
		return strings.Compare(a[i], b[i])
	}
	return len(a) - len(b)
}
