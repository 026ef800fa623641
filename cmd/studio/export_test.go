package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/delegationstudio/studio/internal/otlp/otlptest"
)

// storedExample runs the example into a new database and returns its path
// and the session's id.
func storedExample(t *testing.T) (string, string) {
	t.Helper()
	dbPath := filepath.Join(t.TempDir(), "studio.db")
	code, out, errOut := studio(t, "run", example, "--db", dbPath, "--json")
	if code != exitOK {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	var tr struct {
		Session struct {
			ID string `json:"id"`
		} `json:"session"`
	}
	if err := json.Unmarshal([]byte(out), &tr); err != nil || tr.Session.ID == "" {
		t.Fatalf("run --json: %v", err)
	}
	return dbPath, tr.Session.ID
}

func TestExportFormats(t *testing.T) {
	dbPath, id := storedExample(t)
	var spans int
	t.Run("--format otlp is OTLP/JSON the Collector reads", func(t *testing.T) {
		code, out, errOut := studio(t, "export", id, "--format", "otlp", "--db", dbPath)
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces([]byte(out))
		if code != exitOK || err != nil || td.SpanCount() == 0 {
			t.Fatalf("exit %d: %v %s", code, err, errOut)
		}
		spans = td.SpanCount()
		if strings.Contains(out, "openinference") {
			t.Fatal("OpenInference's attributes without --conventions")
		}
	})
	t.Run("--format otlp-proto is the same spans in protobuf", func(t *testing.T) {
		code, out, errOut := studio(t, "export", id, "--format", "otlp-proto", "--db", dbPath)
		td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces([]byte(out))
		if code != exitOK || err != nil || td.SpanCount() != spans {
			t.Fatalf("exit %d: %v %s (%d spans, want %d)", code, err, errOut, td.SpanCount(), spans)
		}
	})
	t.Run("--conventions genai,openinference and --inputs full", func(t *testing.T) {
		code, out, errOut := studio(t, "export", id, "--format", "otlp", "--conventions", "genai,openinference",
			"--inputs", "full", "--input-cap", "100", "--db", dbPath)
		if code != exitOK || !strings.Contains(out, `"openinference.span.kind"`) || !strings.Contains(out, `"delegation.inputs_cut"`) {
			t.Fatalf("exit %d: %s", code, errOut)
		}
	})
	t.Run("--pretty indents the trace", func(t *testing.T) {
		code, out, _ := studio(t, "export", id, "--pretty", "--db", dbPath)
		if code != exitOK || !strings.HasPrefix(out, "{\n  \"format\": \"delegation-studio.trace\",") {
			t.Fatalf("exit %d: %.80s", code, out)
		}
	})
	t.Run("bad flags exit 2, each problem on its line", func(t *testing.T) {
		code, _, errOut := studio(t, "export", id, "--format", "otlp", "--inputs", "some", "--conventions", "zipkin",
			"--input-cap", "0", "--db", dbPath)
		if code != exitUsage || strings.Count(errOut, "studio export: ") != 3 || !strings.Contains(errOut, `unknown "zipkin"`) {
			t.Fatalf("exit %d: %s", code, errOut)
		}
	})
}

func TestExportPush(t *testing.T) {
	dbPath, id := storedExample(t)
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL",
		"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		t.Setenv(k, "")
	}
	t.Run("--otlp-endpoint pushes protobuf, once", func(t *testing.T) {
		r := otlptest.New(t)
		code, out, errOut := studio(t, "export", id, "--otlp-endpoint", r.URL, "--db", dbPath)
		if code != exitOK || len(r.Requests()) != 1 || r.Requests()[0].Header.Get("Content-Type") != "application/x-protobuf" || len(r.Spans()) == 0 {
			t.Fatalf("exit %d: %s %s; %d requests", code, out, errOut, len(r.Requests()))
		}
		if !strings.Contains(out, "Pushed ") || !strings.Contains(out, r.URL+"/v1/traces") {
			t.Fatalf("output %q", out)
		}
		first := len(r.Spans())
		// A second push someone asked for sends everything again, and says so,
		// in either protocol.
		for i, proto := range []string{"http/protobuf", "http/json"} {
			code, out, errOut = studio(t, "export", id, "--otlp-endpoint", r.URL, "--otlp-protocol", proto, "--db", dbPath)
			if code != exitOK || len(r.Requests()) != 2+i || len(r.Spans()) != (2+i)*first {
				t.Fatalf("push %d (%s): exit %d: %s %s; %d requests, %d spans (first push: %d)", 2+i, proto, code, out, errOut, len(r.Requests()), len(r.Spans()), first)
			}
			if want := fmt.Sprintf("Pushed %d spans", first); !strings.Contains(out, want) || !strings.Contains(out, "every span was sent again") {
				t.Fatalf("push %d: output %q, want %q and what was sent", 2+i, out, want)
			}
		}
	})
	t.Run("--push takes the endpoint and protocol from the environment, and retries a busy one", func(t *testing.T) {
		r := otlptest.New(t)
		r.Fail(http.StatusServiceUnavailable, http.StatusTooManyRequests)
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.URL)
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
		code, out, errOut := studio(t, "export", id, "--push", "--db", dbPath)
		if code != exitOK || len(r.Requests()) != 3 || r.Requests()[2].Header.Get("Content-Type") != "application/json" || len(r.Spans()) == 0 {
			t.Fatalf("exit %d: %s %s; %d requests", code, out, errOut, len(r.Requests()))
		}
	})
	t.Run("a refusal is an error that says what to check", func(t *testing.T) {
		r := otlptest.New(t)
		r.Fail(http.StatusUnauthorized)
		code, _, errOut := studio(t, "export", id, "--otlp-endpoint", r.URL+"/", "--db", dbPath)
		if code != exitFailed || !strings.Contains(errOut, "401 Unauthorized") || !strings.Contains(errOut, "OTEL_EXPORTER_OTLP_HEADERS") {
			t.Fatalf("exit %d: %s", code, errOut)
		}
	})
	t.Run("--push without an endpoint is a usage error", func(t *testing.T) {
		code, _, errOut := studio(t, "export", id, "--push", "--db", dbPath)
		if code != exitUsage || !strings.Contains(errOut, "OTEL_EXPORTER_OTLP_ENDPOINT") {
			t.Fatalf("exit %d: %s", code, errOut)
		}
	})
}

func TestServePushesEachSession(t *testing.T) {
	r := otlptest.New(t)
	s := serve(t, filepath.Join(t.TempDir(), "studio.db"), "--otlp-endpoint", r.URL)
	doc, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.Post(s.url+"/api/sessions", "application/json", bytes.NewReader(doc))
	if err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("start: %v %v", err, res)
	}
	res.Body.Close()
	// The example's session has 8 spans: 2 agents, 4 calls, 2 tools.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if len(r.Spans()) == 8 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the receiver got %d spans, want 8\n%s", len(r.Spans()), s.stderr.String())
}
