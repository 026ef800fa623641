package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestConventions: the CLI behaves as Go tools do.
func TestConventions(t *testing.T) {
	t.Run("--version names the build", func(t *testing.T) {
		for _, arg := range []string{"--version", "-version", "version"} {
			code, out, _ := studio(t, arg)
			if code != exitOK || !strings.HasPrefix(out, "studio ") || !strings.Contains(out, "go1.") {
				t.Errorf("%s: exit %d: %q", arg, code, out)
			}
		}
	})
	t.Run("help CMD is CMD -h, on stdout, exit 0", func(t *testing.T) {
		for _, cmd := range []string{"serve", "run", "validate", "lessons", "sessions", "export", "import"} {
			c1, helpOut, _ := studio(t, "help", cmd)
			c2, dashH, _ := studio(t, cmd, "-h")
			c3, dashDashHelp, _ := studio(t, cmd, "--help")
			if c1 != exitOK || c2 != exitOK || c3 != exitOK {
				t.Errorf("%s: exits %d, %d, %d; help is not an error", cmd, c1, c2, c3)
			}
			if helpOut != dashH || dashH != dashDashHelp || !strings.HasPrefix(helpOut, "usage: studio") {
				t.Errorf("%s: help CMD and CMD -h differ:\n%s\n---\n%s", cmd, helpOut, dashH)
			}
		}
		if code, out, _ := studio(t, "-h"); code != exitOK || !strings.Contains(out, "studio run SCENARIO.json") {
			t.Errorf("studio -h: exit %d", code)
		}
		if code, _, errOut := studio(t, "help", "frobnicate"); code != exitUsage || !strings.Contains(errOut, `unknown command "frobnicate"; the commands are serve, run`) {
			t.Errorf("exit %d: %s", code, errOut)
		}
	})
	t.Run("defaults are said once, with the variable they come from", func(t *testing.T) {
		_, out, _ := studio(t, "help", "sessions")
		if !strings.Contains(out, "(default ./studio.db; env $STUDIO_DB)") || strings.Count(out, "default") != 1 {
			t.Errorf("help:\n%s", out)
		}
		_, out, _ = studio(t, "help", "serve")
		if !strings.Contains(out, "--addr host:port") || strings.Count(out, "127.0.0.1:7788") != 1 {
			t.Errorf("help:\n%s", out)
		}
	})
	t.Run("the token in the environment is never printed in the help", func(t *testing.T) {
		t.Setenv("STUDIO_TOKEN", "sekrit-token-value")
		if _, out, _ := studio(t, "help", "serve"); strings.Contains(out, "sekrit") {
			t.Errorf("help shows the token:\n%s", out)
		}
	})
	t.Run("errors name what was expected", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"export"}, "studio export: give the id of a stored session (see 'studio sessions')"},
			{[]string{"import"}, "studio import: give a trace file"},
			{[]string{"validate"}, "studio validate: give a scenario file"},
			{[]string{"run", "a.json", "b.json"}, "studio run: give one scenario file, or lesson:NAME (see 'studio lessons'), not 2 (a.json, b.json)"},
			{[]string{"sessions", "extra"}, `studio sessions: takes no arguments; got "extra"`},
			{[]string{"run", example, "--frobnicate"}, "studio run: flag provided but not defined: -frobnicate"},
			{[]string{"export", "x", "--format", "yaml"}, `studio export: unknown format "yaml"; use json, otlp or otlp-proto`},
		} {
			code, out, errOut := studio(t, tc.args...)
			if code != exitUsage || out != "" || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "Run 'studio help ") {
				t.Errorf("%v: exit %d, stderr:\n%s\nwant %q", tc.args, code, errOut, tc.want)
			}
		}
	})
	t.Run("a flag left off reads its STUDIO_ variable", func(t *testing.T) {
		t.Setenv("STUDIO_JSON", "true")
		code, out, _ := studio(t, "run", example)
		if code != exitOK || !strings.HasPrefix(out, "{") {
			t.Fatalf("exit %d: %.80s", code, out)
		}
		t.Setenv("STUDIO_JSON", "maybe")
		if code, _, errOut := studio(t, "run", example); code != exitUsage || !strings.Contains(errOut, "$STUDIO_JSON: parse error") {
			t.Fatalf("exit %d: %s", code, errOut)
		}
	})
	t.Run("run --db reads no variable: run keeps nothing unless told (formats.md §4)", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "s.db")
		t.Setenv("STUDIO_DB", p)
		if code, _, _ := studio(t, "run", example); code != exitOK {
			t.Fatal(code)
		}
		if _, out, _ := studio(t, "sessions"); strings.Contains(out, "order-number") {
			t.Fatalf("run stored a session without --db:\n%s", out)
		}
	})
}

func TestLessonVariants(t *testing.T) {
	code, out, errOut := studio(t, "run", "lesson:lost-update--delta")
	if code != exitOK || !strings.HasPrefix(out, "session lost-update--delta: done") {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	code, _, errOut = studio(t, "run", "lesson:lost-update--nope")
	if code != exitUsage || !strings.Contains(errOut, `lesson lost-update has no variant "nope"; run one of lesson:lost-update--snapshot, lesson:lost-update--delta`) {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	_, out, _ = studio(t, "lessons")
	if !strings.Contains(out, "variants: lost-update--snapshot, lost-update--delta") {
		t.Fatalf("lessons:\n%s", out)
	}
}

func TestPlurals(t *testing.T) {
	p := writeFile(t, `{"name":"alone","prompt":"hi","script":{"main":[{"content":"hello"}]}}`)
	_, out, _ := studio(t, "run", p)
	if !strings.HasPrefix(out, "session alone: done · 1 agent · 1 model call · ") || !strings.Contains(out, "main  done  1 step  ") {
		t.Fatalf("output:\n%s", out)
	}
	if _, out, _ = studio(t, "validate", p); !strings.Contains(out, "valid: 1 subagent (general-purpose)") {
		t.Fatalf("validate: %s", out)
	}
}

// TestMissingKey: OpenAI's endpoint without a key fails at once, before
// anything runs or is stored.
func TestMissingKey(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	dbPath := filepath.Join(t.TempDir(), "s.db")
	code, out, errOut := studio(t, "run", "lesson:order-number", "--model", "gpt-4.1-mini", "--db", dbPath)
	if code != exitUsage || out != "" || !strings.Contains(errOut, "no API key for https://api.openai.com/v1: set OPENAI_API_KEY") {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	if _, out, _ := studio(t, "sessions", "--db", dbPath); strings.Contains(out, "order-number") {
		t.Fatal("a session was stored")
	}
	code, _, errOut = studio(t, "serve", "--model", "gpt-4.1-mini", "--db", dbPath, "--addr", "127.0.0.1:0")
	if code != exitUsage || !strings.Contains(errOut, "no API key") {
		t.Fatalf("serve: exit %d: %s", code, errOut)
	}
}

// recordingOpenAI is fakeOpenAI that also records whether each request
// streamed.
func recordingOpenAI(t *testing.T) (*httptest.Server, func() []bool) {
	inner := fakeOpenAI(t)
	var mu sync.Mutex
	var streamed []bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Stream bool `json:"stream"`
		}
		buf, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(buf, &body)
		mu.Lock()
		streamed = append(streamed, body.Stream)
		mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(buf))
		inner.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(inner.Close)
	return srv, func() []bool {
		mu.Lock()
		defer mu.Unlock()
		return append([]bool(nil), streamed...)
	}
}

func TestEndpointFromTheEnvironment(t *testing.T) {
	srv, streamed := recordingOpenAI(t)
	t.Setenv("OPENAI_API_KEY", "sk-test-never-printed")
	t.Setenv("STUDIO_MODEL", "test-model")
	t.Setenv("OPENAI_BASE_URL", srv.URL+"/v1")
	code, out, errOut := studio(t, "run", "lesson:one-delegation", "--no-stream", "--verbose")
	if code != exitOK || !strings.Contains(out, `receipt: "the child's answer is 42"`) {
		t.Fatalf("exit %d:\n%s\n%s", code, out, errOut)
	}
	for i, s := range streamed() {
		if s {
			t.Errorf("request %d streamed despite --no-stream", i)
		}
	}
	if len(streamed()) != 3 {
		t.Errorf("%d requests", len(streamed()))
	}
	// --verbose: progress on stderr, though it is not a terminal.
	for _, want := range []string{"main started", "main → general-purpose [isolated]: \"compute 6*7\"", "general-purpose · call 1 · ", "general-purpose done after 1 step: \"the child's answer is 42\"", "main done after 2 steps"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("progress lacks %q:\n%s", want, errOut)
		}
	}
	if strings.Contains(out+errOut, "sk-test-never-printed") {
		t.Fatal("the API key was printed")
	}
	t.Run("a URL in the environment alone runs nothing against it", func(t *testing.T) {
		t.Setenv("STUDIO_MODEL", "")
		t.Setenv("STUDIO_MODEL_URL", srv.URL+"/v1")
		before := len(streamed())
		if code, _, errOut := studio(t, "run", "lesson:one-delegation"); code != exitOK || len(streamed()) != before {
			t.Fatalf("exit %d, %d requests: %s", code, len(streamed())-before, errOut)
		}
	})
	t.Run("without --verbose, no progress when stderr is not a terminal", func(t *testing.T) {
		code, _, errOut := studio(t, "run", "lesson:one-delegation")
		if code != exitOK || strings.Contains(errOut, "started") {
			t.Fatalf("exit %d: %s", code, errOut)
		}
	})
}

// TestProgressShowsRetries: a retried call is a progress line saying why.
func TestProgressShowsRetries(t *testing.T) {
	inner := fakeOpenAI(t)
	defer inner.Close()
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			w.Header().Set("Retry-After", "0")
			http.Error(w, `{"error": {"message": "overloaded", "type": "server_error"}}`, http.StatusServiceUnavailable)
			return
		}
		inner.Config.Handler.ServeHTTP(w, r)
	}))
	defer srv.Close()
	t.Setenv("OPENAI_API_KEY", "")
	code, out, errOut := studio(t, "run", "lesson:one-delegation", "--model-url", srv.URL+"/v1", "--model", "m", "--verbose")
	if code != exitOK {
		t.Fatalf("exit %d:\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "main · call 1: 503 Service Unavailable: overloaded; retry 1 of 3 in 0s") {
		t.Fatalf("progress:\n%s", errOut)
	}
	if strings.Contains(errOut, "WARN") {
		t.Errorf("the retry was also logged:\n%s", errOut)
	}
}
