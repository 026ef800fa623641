package server

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

func TestOTLPExportAPI(t *testing.T) {
	s := newStudio(t, "")
	doc := []byte(`{"name": "api", "prompt": "p", "script": {"main": [{"tool_calls": [{"name": "ls", "args": {"path": "/"}}]}, {"content": "done"}]}}`)
	res, body := s.api("POST", "/api/sessions", "application/json", doc)
	var created struct{ ID string }
	if res.StatusCode != 201 || json.Unmarshal(body, &created) != nil {
		t.Fatalf("status %d: %s", res.StatusCode, body)
	}
	s.waitDone(created.ID)
	base := "/api/sessions/" + created.ID + "/otlp"

	res, body = s.api("GET", base, "", nil)
	td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(body)
	if res.StatusCode != 200 || err != nil || td.SpanCount() != 4 || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, %v, %d spans", res.StatusCode, err, td.SpanCount())
	}
	t.Run("the last seq is in a header, and after it there is nothing", func(t *testing.T) {
		last, err := strconv.Atoi(res.Header.Get("Studio-Last-Seq"))
		if err != nil || last == 0 {
			t.Fatalf("Studio-Last-Seq %q", res.Header.Get("Studio-Last-Seq"))
		}
		_, body := s.api("GET", base+"?after="+strconv.Itoa(last), "", nil)
		if td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(body); err != nil || td.SpanCount() != 0 {
			t.Fatalf("%v, %d spans after the last seq", err, td.SpanCount())
		}
	})
	t.Run("?format=otlp-proto is protobuf, a download with ?download=1", func(t *testing.T) {
		res, body := s.api("GET", base+"?format=otlp-proto&download=1", "", nil)
		td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(body)
		if res.StatusCode != 200 || err != nil || td.SpanCount() != 4 || res.Header.Get("Content-Type") != "application/x-protobuf" ||
			!strings.Contains(res.Header.Get("Content-Disposition"), ".otlp.pb") {
			t.Fatalf("status %d, %v, %d spans, %q", res.StatusCode, err, td.SpanCount(), res.Header.Get("Content-Disposition"))
		}
	})
	t.Run("whole inputs and OpenInference when asked", func(t *testing.T) {
		_, body := s.api("GET", base+"?inputs=full&input_cap=4096&conventions=genai,openinference", "", nil)
		if !strings.Contains(string(body), `"delegation.inputs","value":{"stringValue":"full"}`) || !strings.Contains(string(body), "openinference.span.kind") {
			t.Fatalf("%.300s", body)
		}
	})
	t.Run("bad parameters are every error, at their fields", func(t *testing.T) {
		res, body := s.api("GET", base+"?inputs=all&input_cap=-1&conventions=x&after=z&format=xml", "", nil)
		var e apiError
		if res.StatusCode != 400 || json.Unmarshal(body, &e) != nil || len(e.Errors) != 5 {
			t.Fatalf("status %d: %s", res.StatusCode, body)
		}
	})
	t.Run("an unknown session is 404", func(t *testing.T) {
		if res, _ := s.api("GET", "/api/sessions/nope/otlp", "", nil); res.StatusCode != 404 {
			t.Fatalf("status %d", res.StatusCode)
		}
	})
}
