package remote

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/delegationstudio/studio/internal/delegation"
)

// A redacted answer keeps its arguments JSON, whether the key was written
// as it is or escaped, and changes nothing that did not hold the key.
func TestRedactResponseKeepsArgumentsJSON(t *testing.T) {
	const key = "sk-abc123def456"
	r := &delegation.Response{Content: "k " + key, Reasoning: key + key,
		ToolCalls: []delegation.ToolCall{
			{ID: "c1", Name: "write_file", Args: json.RawMessage(`{"a":"` + key + `","b":["\u0073k-abc123def456"],"sk-abc123def456":1}`)},
			{ID: "c2", Name: "ls", Args: json.RawMessage(`{"path":"/\u00e9"}`)},
		}}
	RedactResponse(r, key)
	if r.Content != "k [redacted]" || r.Reasoning != "[redacted][redacted]" {
		t.Errorf("text %q, reasoning %q", r.Content, r.Reasoning)
	}
	got := string(r.ToolCalls[0].Args)
	if !json.Valid(r.ToolCalls[0].Args) || strings.Contains(got, "abc123") || strings.Count(got, Redacted) != 3 {
		t.Errorf("arguments %s", got)
	}
	if a := string(r.ToolCalls[1].Args); a != `{"path":"/\u00e9"}` {
		t.Errorf("arguments without the key were written again: %s", a)
	}
}
