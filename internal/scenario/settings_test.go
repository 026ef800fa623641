package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/delegationstudio/studio/internal/delegation"
)

const settingsDoc = `{"name": "s", "prompt": "p",
	"model": {"provider": "openai", "model": "m", "temperature": 0, "max_tokens": 800, "stream": false},
	"agent": {"seed": 7, "tool_choice": "required"},
	"subagents": [
		{"name": "a", "description": "d", "max_tokens": 100, "tool_choice": {"type": "function", "function": {"name": "read_file"}}},
		{"name": "b", "description": "d", "stream": true, "parallel_tool_calls": false}]}`

func TestSettings(t *testing.T) {
	sc, err := Parse([]byte(settingsDoc))
	if err != nil {
		t.Fatal(err)
	}
	f := sc.File
	t.Run("the main agent inherits the model's", func(t *testing.T) {
		s := f.AgentSettings("main")
		if *s.Temperature != 0 || s.MaxTokens != 800 || *s.Stream || *s.Seed != 7 || s.ToolChoice.Name != "required" {
			t.Fatalf("%+v", s)
		}
	})
	t.Run("a subagent inherits the main agent's, tool_choice aside", func(t *testing.T) {
		a, b := f.AgentSettings("a"), f.AgentSettings("b")
		if a.MaxTokens != 100 || *a.Seed != 7 || *a.Temperature != 0 || a.ToolChoice.Name != "read_file" {
			t.Errorf("a: %+v", a)
		}
		if !*b.Stream || *b.ParallelToolCalls || b.MaxTokens != 800 || b.ToolChoice != nil {
			t.Errorf("b: %+v (tool_choice is the agent's own)", b)
		}
		if gp := f.AgentSettings("general-purpose"); gp.ToolChoice != nil || gp.MaxTokens != 800 {
			t.Errorf("general-purpose: %+v", gp)
		}
	})
	t.Run("tool_choice keeps its form through a rewrite", func(t *testing.T) {
		b, _ := json.Marshal(f.Subagents[0].ToolChoice)
		if string(b) != `{"function":{"name":"read_file"},"type":"function"}` {
			t.Errorf("%s", b)
		}
		b, _ = json.Marshal(f.Agent.ToolChoice)
		if string(b) != `"required"` {
			t.Errorf("%s", b)
		}
	})
	t.Run("WithoutStreaming turns every agent's streaming off, and says so in the scenario as run", func(t *testing.T) {
		off, err := WithoutStreaming(sc)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"main", "a", "b"} {
			if s := off.File.AgentSettings(name); s.Stream == nil || *s.Stream {
				t.Errorf("%s still streams", name)
			}
		}
		if !strings.Contains(string(off.Raw), `"stream":false`) || strings.Contains(string(off.Raw), `"stream":true`) {
			t.Errorf("raw %s", off.Raw)
		}
		if f.Subagents[1].Stream == nil || !*f.Subagents[1].Stream {
			t.Error("the original scenario was changed")
		}
	})
	t.Run("bad settings are reported at their fields", func(t *testing.T) {
		doc := strings.NewReplacer(`"temperature": 0`, `"temperature": 3`, `"name": "read_file"`, `"name": "launch"`,
			`"max_tokens": 100`, `"max_tokens": 0`).Replace(settingsDoc)
		errs := parseErrors(t, doc)
		got := map[string]string{}
		for _, e := range errs {
			got[e.Field] = e.Message
		}
		if _, ok := got["model.temperature"]; !ok {
			t.Errorf("no error at model.temperature: %v", errs)
		}
		if _, ok := got["subagents[0].max_tokens"]; !ok {
			t.Errorf("no error at subagents[0].max_tokens: %v", errs)
		}
		doc = strings.Replace(settingsDoc, `"name": "read_file"`, `"name": "launch"`, 1)
		errs = parseErrors(t, doc)
		if len(errs) != 1 || errs[0].Field != "subagents[0].tool_choice" || !strings.Contains(errs[0].Message, `"launch" is neither auto, none nor required, nor one of this agent's tools (ls, read_file`) {
			t.Errorf("errors %v", errs)
		}
	})
}

// TestParseWithFlags: the command line's flags win over the fields they
// name, before the rules are checked, and the scenario as run says so.
func TestParseWithFlags(t *testing.T) {
	ctx := context.Background()
	t.Run("a file with no script runs against the flags' endpoint, as openai", func(t *testing.T) {
		sc, err := ParseWith(ctx, []byte(`{"name": "bare", "prompt": "hi", "agent": {"base_url": "http://file/v1"}}`),
			Flags{BaseURL: "http://flag/v1", Model: "m", NoStream: true})
		if err != nil {
			t.Fatal(err)
		}
		m := sc.File.Model
		if sc.Provider != ProviderOpenAI || m.BaseURL != "http://flag/v1" || m.Model != "m" || sc.File.Agent.BaseURL != "" || sc.Script != nil {
			t.Fatalf("provider %s, model %+v, agent %+v", sc.Provider, m, sc.File.Agent)
		}
		if s := sc.File.AgentSettings("main"); s.Stream == nil || *s.Stream {
			t.Error("--no-stream left streaming on")
		}
		if !strings.Contains(string(sc.Raw), `"base_url":"http://flag/v1"`) {
			t.Errorf("raw %s", sc.Raw)
		}
	})
	t.Run("the file's provider and the fields no flag gives stay", func(t *testing.T) {
		sc, err := ParseWith(ctx, []byte(`{"name": "a", "prompt": "hi", "model": {"provider": "anthropic", "base_url": "http://file", "api_key_env": "MY_API_KEY"}}`),
			Flags{Model: "claude-x", FallbackURL: "http://fallback/v1"})
		if err != nil {
			t.Fatal(err)
		}
		if m := sc.File.Model; sc.Provider != ProviderAnthropic || m.BaseURL != "http://file" || m.APIKeyEnv != "MY_API_KEY" || m.Model != "claude-x" {
			t.Fatalf("provider %s, model %+v", sc.Provider, m)
		}
	})
	t.Run("an openai provider with no URL anywhere gets the fallback", func(t *testing.T) {
		sc, err := ParseWith(ctx, []byte(`{"name": "a", "prompt": "hi", "model": {"provider": "scripted"}, "script": {"main": [{"content": "x"}]}}`),
			Flags{Model: "m", FallbackURL: "http://fallback/v1"})
		if err != nil {
			t.Fatal(err)
		}
		if sc.Provider != ProviderOpenAI || sc.File.Model.BaseURL != "http://fallback/v1" || sc.File.Script != nil {
			t.Fatalf("provider %s, model %+v", sc.Provider, sc.File.Model)
		}
	})
	t.Run("what the flags leave wrong is reported at the file's field", func(t *testing.T) {
		_, err := ParseWith(ctx, []byte(`{"name": "a", "prompt": "hi"}`), Flags{BaseURL: "http://flag/v1"})
		var fe delegation.FieldErrors
		if !errors.As(err, &fe) || len(fe) != 1 || fe[0].Field != "model.model" {
			t.Fatalf("%v", err)
		}
	})
}
