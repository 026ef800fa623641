// Package schema holds the published JSON Schemas of Delegation Studio's two
// public file formats (formats.md §1 the scenario, §2 the trace) and checks
// documents against them, reporting every problem tied to its field in words
// meant for the person who has to fix it.
//
// The schemas check shape only. The rules that need the whole team (subagent
// modes, duplicate names, skills with fork, response_format) are the
// engine's, which reports them with its own exact texts.
package schema

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

//go:embed *.json
var schemaFiles embed.FS

// The schemas' $id, where they are published.
const (
	ScenarioID = "https://delegation.studio/schema/scenario.schema.json"
	TraceID    = "https://delegation.studio/schema/trace.schema.json"
)

// FieldError is one problem with a document, tied to the field it is about.
type FieldError struct {
	Field   string `json:"field"`   // e.g. "subagents[1].mode", "script.main[2].tool_calls[0].name", "" for the document itself
	Message string `json:"message"` // written for a person: what is wrong and how to fix it
}

// Error returns "field: message", or just the message when Field is "".
func (e FieldError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

// Scenario returns the scenario schema's text, for serving or publishing.
func Scenario() []byte { return bytes.Clone(mustRead("scenario.schema.json")) }

// Trace returns the trace schema's text, for serving or publishing.
func Trace() []byte { return bytes.Clone(mustRead("trace.schema.json")) }

// ValidateScenario checks a scenario document (raw JSON) against the
// scenario schema. It returns every problem, each tied to its field (at most
// MaxErrors, then one entry counting the rest), or nil.
func ValidateScenario(doc []byte) []FieldError {
	errs, _ := ValidateScenarioContext(context.Background(), doc)
	return errs
}

// ValidateTrace checks a trace document (raw JSON) against the trace schema,
// as ValidateScenario does.
func ValidateTrace(doc []byte) []FieldError {
	errs, _ := ValidateTraceContext(context.Background(), doc)
	return errs
}

// ValidateScenarioContext is ValidateScenario that gives up when ctx ends
// (the client went away), returning ctx's error. It looks between its
// passes and while it writes the report; the validator's own pass is linear
// in the document and cannot be interrupted.
func ValidateScenarioContext(ctx context.Context, doc []byte) ([]FieldError, error) {
	return schemas().scenario.validate(ctx, doc)
}

// ValidateTraceContext is ValidateTrace that gives up when ctx ends.
func ValidateTraceContext(ctx context.Context, doc []byte) ([]FieldError, error) {
	return schemas().trace.validate(ctx, doc)
}

// compiled is one schema, ready to validate with.
type compiled struct {
	id     string
	schema *jsonschema.Schema
	raw    any // the schema document, to look up the fields an object allows
}

type compiledSet struct{ scenario, trace *compiled }

var (
	compileOnce sync.Once
	compiledSch compiledSet
)

// schemas compiles both schemas the first time it is called. A schema that
// does not compile is a bug in this package, so it panics.
func schemas() compiledSet {
	compileOnce.Do(func() {
		c := jsonschema.NewCompiler()
		// Both schemas are embedded whole: nothing is ever loaded from a
		// file or the network.
		c.UseLoader(noLoader{})
		c.DefaultDraft(jsonschema.Draft2020)
		c.AssertFormat()
		load := func(id, file string) *compiled {
			raw, err := jsonschema.UnmarshalJSON(bytes.NewReader(mustRead(file)))
			if err != nil {
				panic(fmt.Sprintf("schema: %s is not valid JSON: %v", file, err))
			}
			if err := c.AddResource(id, raw); err != nil {
				panic(fmt.Sprintf("schema: adding %s: %v", file, err))
			}
			return &compiled{id: id, raw: raw}
		}
		sc := load(ScenarioID, "scenario.schema.json")
		tr := load(TraceID, "trace.schema.json")
		for _, s := range []*compiled{sc, tr} {
			sch, err := c.Compile(s.id)
			if err != nil {
				panic(fmt.Sprintf("schema: compiling %s: %v", s.id, err))
			}
			s.schema = sch
		}
		compiledSch = compiledSet{scenario: sc, trace: tr}
	})
	return compiledSch
}

func mustRead(name string) []byte {
	b, err := schemaFiles.ReadFile(name)
	if err != nil {
		panic("schema: " + err.Error())
	}
	return b
}

func (s *compiled) validate(ctx context.Context, doc []byte) ([]FieldError, error) {
	if fe := checkSyntax(doc); fe != nil {
		return []FieldError{*fe}, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil { // checkSyntax let it through; should not happen
		return []FieldError{{Message: "the file is not valid JSON: " + err.Error()}}, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	err = s.schema.Validate(inst)
	if err == nil {
		return nil, nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return []FieldError{{Message: err.Error()}}, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := reporter{ctx: ctx, schema: s, doc: inst}
	errs := r.fieldErrors(r.collect(verr))
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return errs, nil
}

// checkSyntax reports a document that is not JSON, saying where it broke.
func checkSyntax(doc []byte) *FieldError {
	if len(bytes.TrimSpace(doc)) == 0 {
		return &FieldError{Message: "the file is empty: it is not valid JSON (a scenario or trace is a JSON object, {...})"}
	}
	if !utf8.Valid(doc) {
		// JSON is UTF-8; decoding would silently turn the bad bytes into
		// U+FFFD, and the studio would keep something else than was sent.
		off := firstInvalidUTF8(doc)
		line, col := lineCol(doc, off)
		return &FieldError{Message: fmt.Sprintf("the file is not valid UTF-8: at line %d, column %d (byte %d): save it as UTF-8", line, col, off+1)}
	}
	var raw json.RawMessage
	err := json.Unmarshal(doc, &raw)
	if err == nil {
		return nil
	}
	var serr *json.SyntaxError
	if !errors.As(err, &serr) {
		return &FieldError{Message: "the file is not valid JSON: " + err.Error()}
	}
	off := int(serr.Offset)
	what := serr.Error()
	if what == "unexpected end of JSON input" {
		what = "it ends before the JSON is complete (a missing closing bracket, brace or quote?)"
	} else if off > 0 {
		off-- // Offset counts the byte that broke it: point at that byte
	}
	line, col := lineCol(doc, off)
	return &FieldError{Message: fmt.Sprintf("the file is not valid JSON: at line %d, column %d: %s", line, col, what)}
}

// firstInvalidUTF8 is the offset of the first byte that is not part of a
// valid UTF-8 sequence.
func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return len(b)
}

// lineCol turns a byte offset into a 1-based line and column (in characters).
func lineCol(doc []byte, off int) (line, col int) {
	if off > len(doc) {
		off = len(doc)
	}
	before := doc[:off]
	line = 1 + bytes.Count(before, []byte{'\n'})
	if i := bytes.LastIndexByte(before, '\n'); i >= 0 {
		before = before[i+1:]
	}
	col = 1 + utf8.RuneCount(before)
	return line, col
}

// fieldPath writes an instance location as a path a person reads:
// subagents[1].max_steps, files["/README.md"]. Whether a token indexes an
// array is read from the document itself.
func fieldPath(doc any, loc []string) string {
	var sb strings.Builder
	cur := doc
	for _, tok := range loc {
		switch v := cur.(type) {
		case []any:
			sb.WriteString("[" + tok + "]")
			cur = nil
			var i int
			if _, err := fmt.Sscanf(tok, "%d", &i); err == nil && i >= 0 && i < len(v) {
				cur = v[i]
			}
			continue
		case map[string]any:
			cur = v[tok]
		default:
			cur = nil
		}
		if isIdent(tok) && len(tok) <= maxFieldToken {
			if sb.Len() > 0 {
				sb.WriteByte('.')
			}
			sb.WriteString(tok)
		} else {
			sb.WriteString(Key(tok))
		}
	}
	return sb.String()
}

// Key is a key of an object in a field path: ["/a b.md"]. A long key is
// cut, saying its length: the path says where, not the whole key.
func Key(tok string) string {
	q, _ := json.Marshal(shorten(tok, maxFieldToken))
	return "[" + string(q) + "]"
}

// maxFieldToken is the longest key a field path shows whole.
const maxFieldToken = 100

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_' || r == '$' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z':
		case i > 0 && (r == '-' || r >= '0' && r <= '9'):
		default:
			return false
		}
	}
	return true
}

// valueAt returns the instance value at loc, or nil.
func valueAt(doc any, loc []string) (any, bool) {
	cur := doc
	for _, tok := range loc {
		switch v := cur.(type) {
		case map[string]any:
			x, ok := v[tok]
			if !ok {
				return nil, false
			}
			cur = x
		case []any:
			var i int
			if _, err := fmt.Sscanf(tok, "%d", &i); err != nil || i < 0 || i >= len(v) {
				return nil, false
			}
			cur = v[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// noLoader is a JSON Schema loader that loads nothing: a schema may refer
// only to itself ("#/$defs/…") and to the standard metaschemas the library
// carries, never to a file or a URL.
type noLoader struct{}

// Load refuses every URL.
func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s is outside the schema: only references within it (\"#/$defs/…\") are allowed", url)
}
