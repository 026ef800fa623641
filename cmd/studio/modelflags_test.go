package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/delegationstudio/studio/internal/model/openai/openaitest"
)

// runBinary runs the studio binary with the environment's STUDIO_ and
// OPENAI_ variables left out, plus env.
func runBinary(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(studioBinary(t), args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STUDIO_") && !strings.HasPrefix(kv, "OPENAI_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), out.String(), errOut.String()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, out.String(), errOut.String()
}

// TestFlagsOverAScriptlessFile: run's model flags win over the scenario
// file's fields, and the file is checked with them, once: a file with no
// script, or with provider openai and no model, runs against a fake
// OpenAI-compatible endpoint; what the flags do not fix still fails,
// naming the file's field and the flag that would.
func TestFlagsOverAScriptlessFile(t *testing.T) {
	var mu sync.Mutex
	var models []string // the model each request asked for
	srv := openaitest.NewServer(t, func(r openaitest.Request) openaitest.Reply {
		mu.Lock()
		models = append(models, r.Model)
		mu.Unlock()
		return openaitest.Reply{Content: "hi from the fake", Usage: map[string]any{"prompt_tokens": 10, "completion_tokens": 3}}
	})
	asked := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := models
		models = nil
		return out
	}
	url := srv.URL + "/v1"
	bare := writeFile(t, `{"name": "bare", "prompt": "Say hi."}`)

	// ran checks a run that ended done, its calls asking for model, and
	// returns the scenario as run, from its trace.
	ran := func(t *testing.T, model string, args ...string) map[string]any {
		t.Helper()
		code, out, errOut := runBinary(t, nil, append([]string{"run", "--json"}, args...)...)
		if code != exitOK {
			t.Fatalf("exit %d:\n%s", code, errOut)
		}
		if got := asked(); len(got) != 1 || got[0] != model {
			t.Fatalf("the endpoint was asked for %q, want one call for %q", got, model)
		}
		var tr struct {
			Session struct {
				Status string `json:"status"`
			} `json:"session"`
			Scenario map[string]any `json:"scenario"`
		}
		if err := json.Unmarshal([]byte(out), &tr); err != nil {
			t.Fatalf("%v:\n%s", err, out)
		}
		if tr.Session.Status != "done" {
			t.Fatalf("status %q:\n%s", tr.Session.Status, out)
		}
		return tr.Scenario
	}

	t.Run("a file with no script runs against --model-url and --model", func(t *testing.T) {
		sc := ran(t, "mock-model", bare, "--model-url", url, "--model", "mock-model")
		m, _ := sc["model"].(map[string]any)
		if m["provider"] != "openai" || m["model"] != "mock-model" || m["base_url"] != url {
			t.Fatalf("the scenario as run says model %v", sc["model"])
		}
	})
	t.Run("a file with provider openai and no model runs with --model, at the file's URL", func(t *testing.T) {
		file := writeFile(t, `{"name": "prov", "prompt": "Say hi.", "model": {"provider": "openai", "base_url": "`+url+`"}}`)
		ran(t, "mock-model", file, "--model", "mock-model")
	})
	t.Run("the flags given win over the file's model and URL", func(t *testing.T) {
		file := writeFile(t, `{"name": "full", "prompt": "Say hi.", "model": {"provider": "openai", "model": "file-model", "base_url": "http://127.0.0.1:9/v1"},
			"agent": {"base_url": "http://127.0.0.1:9/v1"}}`)
		ran(t, "flag-model", file, "--model-url", url, "--model", "flag-model", "--no-stream")
	})
	t.Run("without the flags a scriptless file says which flags would run it", func(t *testing.T) {
		code, _, errOut := runBinary(t, nil, "run", bare)
		if code != exitUsage || !strings.Contains(errOut, bare+": script: the scripted model needs a script") ||
			!strings.Contains(errOut, "or give --model-url URL --model NAME to run it against a model") {
			t.Fatalf("exit %d:\n%s", code, errOut)
		}
	})
	t.Run("a URL without a model still fails, naming the field and the flag", func(t *testing.T) {
		code, _, errOut := runBinary(t, nil, "run", bare, "--model-url", url)
		want := bare + `: model.model: name the model to call, e.g. "gpt-4.1-mini"; or give --model NAME`
		if code != exitUsage || strings.TrimSpace(errOut) != want {
			t.Fatalf("exit %d:\n%s\nwant:\n%s", code, errOut, want)
		}
	})
	t.Run("a key variable from the flag that is not set fails, saying the flag set it", func(t *testing.T) {
		code, _, errOut := runBinary(t, nil, "run", bare, "--model-url", url, "--model", "m", "--api-key-env", "STUDIO_TEST_UNSET_API_KEY")
		if code != exitUsage || !strings.Contains(errOut, bare+": model.api_key_env (from --api-key-env): STUDIO_TEST_UNSET_API_KEY is not set in the environment") {
			t.Fatalf("exit %d:\n%s", code, errOut)
		}
	})
	t.Run("a key variable not named like a key is refused, as in the file", func(t *testing.T) {
		code, _, errOut := runBinary(t, nil, "run", bare, "--model-url", url, "--model", "m", "--api-key-env", "HOME")
		if code != exitUsage || !strings.Contains(errOut, `studio run: --api-key-env: the key variable "HOME" must be named like OPENAI_API_KEY (ending in _API_KEY)`) {
			t.Fatalf("exit %d:\n%s", code, errOut)
		}
	})
	t.Run("what no flag sets still fails as the file's", func(t *testing.T) {
		file := writeFile(t, `{"name": "odd", "prompt": "Say hi.", "model": {"provider": "bedrock"}}`)
		code, _, errOut := runBinary(t, nil, "run", file, "--model-url", url, "--model", "m")
		if code != exitUsage || !strings.Contains(errOut, file+`: model.provider: must be one of "scripted", "openai", "anthropic", not "bedrock"`) {
			t.Fatalf("exit %d:\n%s", code, errOut)
		}
	})
	if got := asked(); len(got) != 0 {
		t.Fatalf("a failed check still called the endpoint: %q", got)
	}
}
