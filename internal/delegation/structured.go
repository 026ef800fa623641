package delegation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// structuredTool is the extra tool a subagent with a response_format gets
// (delegation.md §10): named after the schema's title, its arguments are the
// schema. A valid call ends the child; its receipt is the compact JSON.
type structuredTool struct {
	tool
	schema *jsonschema.Schema
}

// newStructuredTool checks a response_format and builds its tool. On a
// problem it returns a message that completes "SubAgent 'x' …".
func newStructuredTool(raw json.RawMessage) (*structuredTool, string) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Sprintf("has a response_format that is not valid JSON: %v", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Sprintf("has unsupported response_format of type %s; expected a JSON Schema object with a \"title\"", jsonType(v))
	}
	title, _ := obj["title"].(string)
	if title == "" {
		return nil, "has a response_format without a \"title\"; the title names the tool the subagent calls to give its answer"
	}
	if !toolNameRE().MatchString(title) {
		return nil, fmt.Sprintf("has a response_format title '%s' that cannot name a tool; use letters, digits, '_' and '-' only", title)
	}
	if t, ok := obj["type"]; ok && t != "object" {
		return nil, fmt.Sprintf("has a response_format of type '%v'; the structured answer is a tool's arguments, so it must be of type 'object'", t)
	}
	c := jsonschema.NewCompiler()
	// The schema is the user's: it may refer within itself, never to a
	// file of the server or to a URL. The resource's own address is not a
	// file path either, or relative $refs would resolve against the
	// server's working directory.
	c.UseLoader(noLoader{})
	if err := c.AddResource(responseFormatURL, v); err != nil {
		return nil, fmt.Sprintf("has a response_format that is not a valid JSON Schema: %v", err)
	}
	sch, err := c.Compile(responseFormatURL)
	if err != nil {
		var le *jsonschema.LoadURLError
		if errors.As(err, &le) {
			return nil, fmt.Sprintf("has a response_format whose $ref %q points outside it; only references within it (\"#/$defs/…\") are allowed", refShown(le.URL))
		}
		return nil, fmt.Sprintf("has a response_format that is not a valid JSON Schema: %v", err)
	}
	desc, _ := obj["description"].(string)
	if desc == "" {
		desc = "Give your final answer by calling this tool. Calling it ends your task; its arguments are your answer."
	}
	params := raw
	if _, ok := obj["type"]; !ok {
		obj["type"] = "object"
		params, _ = json.Marshal(obj)
	}
	return &structuredTool{
		tool:   tool{def: ToolDef{Name: title, Description: desc, Parameters: params}},
		schema: sch,
	}, ""
}

// responseFormatURL is where a response_format is filed while it compiles:
// a host that cannot exist (.invalid), so that relative $refs resolve to
// URLs the loader refuses, never to the server's files.
const (
	responseFormatHost = "https://response-format.invalid"
	responseFormatURL  = responseFormatHost + "/schema.json"
)

// noLoader refuses to load anything, so a response_format's $ref can read
// no file (nor hang on a FIFO) and reach no host.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s is outside the response_format", url)
}

// refShown is a refused $ref as the user wrote it, as near as can be told
// once resolved: without the response_format's own address.
func refShown(url string) string {
	return strings.TrimPrefix(url, responseFormatHost)
}

// check validates a structured answer; it returns the compact JSON, or a
// tool error naming the failing field.
func (st *structuredTool) check(args json.RawMessage) (string, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return "", toolErrorf("Invalid arguments for %s: they are not valid JSON (%v). Call %s again.", st.def.Name, err, st.def.Name)
	}
	if err := st.schema.Validate(v); err != nil {
		return "", toolErrorf("Invalid arguments for %s: %s. Call %s again with arguments that match its schema.", st.def.Name, describeSchemaError(err), st.def.Name)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, args); err != nil {
		return "", toolErrorf("Invalid arguments for %s: %v.", st.def.Name, err)
	}
	return buf.String(), nil
}

// englishPrinter is made on first use: a process that validates no
// structured answer pays nothing for it.
var englishPrinter = sync.OnceValue(func() *message.Printer { return message.NewPrinter(language.English) })

// describeSchemaError names each failing field of a validation error.
func describeSchemaError(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	var parts []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			field := "/" + strings.Join(e.InstanceLocation, "/")
			parts = append(parts, fmt.Sprintf("at '%s': %s", field, e.ErrorKind.LocalizedString(englishPrinter())))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return strings.Join(parts, "; ")
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	case []any:
		return "array"
	}
	return "object"
}
