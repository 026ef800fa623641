package proxy_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/proxy"
)

// FuzzParse: whatever a client sends, Parse answers an OpenAI error (400,
// with a message) or a request the inference can read, and never panics.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`{"model": "m", "messages": [{"role": "user", "content": "hi"}]}`,
		`{"model": "m", "stream": true, "stream_options": {"include_usage": true}, "messages": [{"role": "system", "content": [{"type": "text", "text": "s"}]}, {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}`,
		`{"model": "m", "messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "c", "content": "x"}], "tools": [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}], "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {}}}}`,
		`{"model": 1}`, `[]`, `{"messages": null}`, `{"model": "m", "messages": [{"role": "function", "name": "f", "content": "x"}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := proxy.Parse(body)
		if err != nil {
			if err.Status != http.StatusBadRequest || err.Message == "" || !json.Valid(err.Body()) {
				t.Fatalf("error %+v for %q", err, body)
			}
			return
		}
		if req.Model == "" || len(req.Messages) == 0 {
			t.Fatalf("accepted without a model or messages: %q", body)
		}
		// Every message is either the system prompt or in the input.
		in := req.Call(time.Time{})
		if len(in.Input) == 0 && in.System == "" && req.Messages[0].Content != "" {
			t.Fatalf("an accepted request reads as nothing: %q", body)
		}
		_ = req.CheckSequence()
		_ = req.Starts()
	})
}
