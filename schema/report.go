package schema

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/delegationstudio/studio/internal/i18n"
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
	ctx    context.Context
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
				msg := fmt.Sprintf("file path %s must be absolute: start it with \"/\", e.g. %s",
					quoteShort(p), quoteShort("/"+strings.TrimLeft(p, "./")))
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
	// The fields each form allows, gathered once: a value with many
	// unknown fields must not cost fields × problems.
	knownBy := map[string][]string{}
	for _, b := range branches {
		seen := map[string]bool{}
		for _, l := range b {
			if l.unknown != "" && universal[l.unknown] && !seen[l.unknown] && slices.Equal(l.at, L) {
				seen[l.unknown] = true
				knownBy[l.unknown] = append(knownBy[l.unknown], l.known...)
			}
		}
	}
	for _, name := range names {
		known := knownBy[name]
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
		switch {
		case r.isDef(e.SchemaURL, "/$defs/keyEnv"):
			return fmt.Sprintf(`%s cannot hold an API key here: a key variable's name ends in _API_KEY (e.g. "OPENAI_API_KEY"), so that a scenario cannot send other variables of the environment to an endpoint`, display(k.Got))
		case r.isDef(e.SchemaURL, "/$defs/endpointName"):
			return fmt.Sprintf("%s is not an endpoint name: names are letters, digits, '.', '_' and '-', at most 64", display(k.Got))
		}
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
		v = shorten(s, 40)
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
	msg := fmt.Sprintf("unknown field %s", quoteShort(name))
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

// maxSuggestLen is the longest name a suggestion is looked for: a typo of a
// field name is short, and the distance costs the product of the lengths.
const maxSuggestLen = 64

// normalizer folds "_" and "-" away before names are compared; built once,
// it is safe for concurrent use.
var normalizer = strings.NewReplacer("_", "", "-", "")

// suggest returns the candidate closest in spelling to name, if one is close
// enough to be a likely typo: an edit distance of at most 2 (1 for names of
// four letters or fewer), ignoring case, "_" and "-"; or a name of four
// letters or more that a candidate starts with. Names longer than
// maxSuggestLen get no suggestion.
func suggest(name string, candidates []string) string {
	n := utf8.RuneCountInString(name)
	if n > maxSuggestLen || len(name) > 4*maxSuggestLen {
		return ""
	}
	limit := 2
	if n <= 4 {
		limit = 1
	}
	lower := strings.ToLower(name)
	norm := normalizer.Replace(lower)
	best, bestD := "", limit+1
	for _, c := range candidates {
		if c == name {
			continue
		}
		cl := strings.ToLower(c)
		cn := normalizer.Replace(cl)
		var d int
		switch {
		case norm == cn:
			d = 0
		case len(norm) >= 4 && strings.HasPrefix(cn, norm):
			d = limit // "delay" for "delay_ms": a likely short form
		default:
			d = editDistance(lower, cl, limit)
		}
		if d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the optimal-string-alignment distance: insertions,
// deletions, substitutions and swaps of neighbours each cost one. Past
// limit it returns limit+1 without finishing: only close names matter.
func editDistance(a, b string, limit int) int {
	s, t := []rune(a), []rune(b)
	if d := len(s) - len(t); d > limit || -d > limit {
		return limit + 1
	}
	// Three rows: the current one, the one above, and the one above that
	// (for swaps).
	prev2 := make([]int, len(t)+1)
	prev := make([]int, len(t)+1)
	cur := make([]int, len(t)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(s); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(t); j++ {
			cost := 1
			if s[i-1] == t[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && s[i-1] == t[j-2] && s[i-2] == t[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
			rowMin = min(rowMin, cur[j])
		}
		if rowMin > limit {
			return limit + 1
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return min(prev[len(t)], limit+1)
}

// quoteShort quotes a name from the document for a message, cut short when
// it is long: a message shows which field, not all of it.
func quoteShort(s string) string {
	return strconv.Quote(shorten(s, 60))
}

// shorten cuts s to at most n characters, saying its full length
// (i18n.Excerpt).
func shorten(s string, n int) string { return i18n.Excerpt(s, n) }

// MaxErrors is the most problems a document gets reported: past it a person
// fixes what is listed and checks again, and a document made of errors costs
// the server no more than a short one.
const MaxErrors = 50

// moreMessage is the last entry of a list cut at MaxErrors. The engine's
// lists end the same way (delegation.MoreErrors), and count it back.
func moreMessage(n int) string {
	return fmt.Sprintf("and %d more problems not listed: fix these and check again", n)
}

// fieldErrors renders leaves as FieldErrors, de-duplicated and sorted by
// field (array indexes in numeric order), then message; past MaxErrors the
// rest are counted in one last entry. Messages, and their suggestions, are
// written only for the problems listed, and only those are sorted: a
// document of 200,000 unknown keys costs a few comparisons per key, not a
// sort of them all.
func (r *reporter) fieldErrors(leaves []leaf) []FieldError {
	type item struct {
		loc   []string
		field string
		l     *leaf
		i     int // the order found, which breaks ties
	}
	less := func(a, b item) int {
		if c := compareLoc(a.loc, b.loc); c != 0 {
			return c
		}
		if c := strings.Compare(a.l.msg, b.l.msg); c != 0 {
			return c
		}
		return a.i - b.i
	}
	type key struct{ field, msg, unknown string }
	seen := map[key]bool{}
	// The fields allowed beside an unknown one are one slice for all the
	// unknown fields of an object: joined once.
	type slice struct {
		first *string
		n     int
	}
	joined := map[slice]string{}
	// first holds the MaxErrors smallest items so far, in order.
	first := make([]item, 0, MaxErrors+1)
	count := 0
	for i := range leaves {
		l := &leaves[i]
		if i%1024 == 0 && r.ctx.Err() != nil {
			return nil
		}
		k := key{field: fieldPath(r.doc, l.loc), msg: l.msg, unknown: l.unknown}
		if l.unknown != "" && len(l.known) > 0 {
			id := slice{&l.known[0], len(l.known)}
			j, ok := joined[id]
			if !ok {
				j = strings.Join(l.known, ",")
				joined[id] = j
			}
			k.msg = j
		}
		if seen[k] {
			continue
		}
		seen[k] = true
		it := item{l.loc, k.field, l, count}
		count++
		if len(first) == MaxErrors && less(it, first[MaxErrors-1]) >= 0 {
			continue
		}
		at, _ := slices.BinarySearchFunc(first, it, less)
		first = slices.Insert(first, at, it)
		if len(first) > MaxErrors {
			first = first[:MaxErrors]
		}
	}
	out := make([]FieldError, 0, len(first)+1)
	for _, it := range first {
		msg := it.l.msg
		if it.l.unknown != "" {
			msg = unknownMessage(it.l.unknown, it.l.known)
		}
		if len(it.loc) == 0 && strings.HasPrefix(msg, "must ") {
			msg = "the document " + msg
		}
		out = append(out, FieldError{Field: it.field, Message: msg})
	}
	if count > len(first) {
		out = append(out, FieldError{Message: moreMessage(count - len(first))})
	}
	return out
}

func compareLoc(a, b []string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] == b[i] {
			continue
		}
		if isIndex(a[i]) && isIndex(b[i]) {
			// Array indexes in numeric order: shorter is smaller, then by digits.
			if len(a[i]) != len(b[i]) {
				return len(a[i]) - len(b[i])
			}
		}
		return strings.Compare(a[i], b[i])
	}
	return len(a) - len(b)
}

// isIndex reports whether a location token is an array index: digits, with
// no leading zero.
func isIndex(s string) bool {
	if s == "" || len(s) > 1 && s[0] == '0' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
