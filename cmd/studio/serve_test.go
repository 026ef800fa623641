package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestServeConfiguration(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	t.Setenv("STUDIO_TOKEN", "")
	t.Run("a weak token is refused, saying how to make one", func(t *testing.T) {
		tok := filepath.Join(dir, "weak")
		os.WriteFile(tok, []byte("secret\n"), 0o600)
		code, _, errOut := studio(t, "serve", "--addr", "0.0.0.0:0", "--db", db, "--token-file", tok)
		if code != exitUsage || !strings.Contains(errOut, "it needs at least 16") || !strings.Contains(errOut, "openssl rand -hex 32") {
			t.Fatalf("exit %d: %s", code, errOut)
		}
	})
	t.Run("a bad --endpoint is refused", func(t *testing.T) {
		for _, spec := range []string{"local", "x=ftp://h", "x=http://h/v1,STUDIO_TOKEN"} {
			code, _, errOut := studio(t, "serve", "--db", db, "--endpoint", spec)
			if code != exitUsage || !strings.Contains(errOut, "endpoint") {
				t.Fatalf("%s: exit %d: %s", spec, code, errOut)
			}
		}
		code, _, errOut := studio(t, "serve", "--db", db, "--endpoint", "a=http://h/v1", "--endpoint", "a=http://g/v1")
		if code != exitUsage || !strings.Contains(errOut, "two endpoints are named a") {
			t.Fatalf("exit %d: %s", code, errOut)
		}
	})
	t.Run("a config file with a typo is refused", func(t *testing.T) {
		cfg := filepath.Join(dir, "studio.json")
		os.WriteFile(cfg, []byte(`{"endpoints": [{"name": "local", "base_url": "http://127.0.0.1:8080/v1", "modle": "x"}]}`), 0o600)
		code, _, errOut := studio(t, "serve", "--db", db, "--config", cfg)
		if code != exitUsage || !strings.Contains(errOut, `unknown field "modle"`) {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		os.WriteFile(cfg, []byte(`{"endpoints": [{"name": "local", "base_url": "http://127.0.0.1:8080/v1", "api_key_env": "AWS_SECRET_ACCESS_KEY"}]}`), 0o600)
		if code, _, errOut := studio(t, "serve", "--db", db, "--config", cfg); code != exitUsage || !strings.Contains(errOut, "ending in _API_KEY") {
			t.Fatalf("exit %d: %s", code, errOut)
		}
	})
	t.Run("a bad upstream is refused, saying what to give", func(t *testing.T) {
		t.Setenv("UNSET_API_KEY", "")
		os.Unsetenv("UNSET_API_KEY")
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"--upstream", "nope"}, `give script:SCENARIO.json, or the name of an endpoint`},
			{[]string{"--upstream", "script:"}, "give the scenario"},
			{[]string{"--upstream", "script:lesson:nope"}, `no lesson "nope"`},
			{[]string{"--upstream", "script:lesson:order-number", "--upstream-url", "http://h/v1"}, "not both"},
			{[]string{"--upstream-url", "ftp://h"}, "not an absolute http(s) URL"},
			{[]string{"--upstream-url", "http://h/v1", "--upstream-key-env", "STUDIO_TOKEN"}, "ending in _API_KEY"},
			{[]string{"--upstream-url", "http://h/v1", "--upstream-key-env", "UNSET_API_KEY"}, "UNSET_API_KEY, which is not set"},
			{[]string{"--upstream-key-env", "X_API_KEY"}, "goes with --upstream-url"},
		} {
			code, _, errOut := studio(t, append([]string{"serve", "--db", db}, c.args...)...)
			if code != exitUsage || !strings.Contains(errOut, c.want) {
				t.Errorf("%v: exit %d: %s", c.args, code, errOut)
			}
		}
	})
	t.Run("a limit below 1 or a session cap above the whole is refused", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"--max-viewers", "0"}, "--max-viewers is 0: give a number of 1 or more"},
			{[]string{"--max-session-viewers", "-1"}, "--max-session-viewers is -1"},
			{[]string{"--max-big-calls", "0"}, "--max-big-calls is 0"},
			{[]string{"--max-client-connections", "0"}, "--max-client-connections is 0"},
			{[]string{"--max-session-viewers", "300"}, "--max-session-viewers (300) is more than --max-viewers (256)"},
		} {
			code, _, errOut := studio(t, append([]string{"serve", "--db", db}, c.args...)...)
			if code != exitUsage || !strings.Contains(errOut, c.want) {
				t.Errorf("%v: exit %d: %s", c.args, code, errOut)
			}
		}
	})
	t.Run("--help shows no token", func(t *testing.T) {
		t.Setenv("STUDIO_TOKEN", "0b8c2f5e9a7d4c1b6e3f-secret")
		_, out, errOut := studio(t, "serve", "--help")
		if strings.Contains(out+errOut, "0b8c2f5e9a7d4c1b6e3f") || !strings.Contains(out, "--allowed-host") || !strings.Contains(out, "--endpoint NAME=[PROVIDER:]URL[,KEY_ENV[,MODEL]]") {
			t.Fatalf("help:\n%s", out)
		}
	})
}

// Finding 9 of issue 21: a damaged database said only what SQLite says.
func TestDamagedDatabaseIsNamed(t *testing.T) {
	p := filepath.Join(t.TempDir(), "bad.db")
	os.WriteFile(p, []byte(strings.Repeat("not a database ", 400)), 0o600)
	code, _, errOut := studio(t, "sessions", "--db", p)
	if code != exitFailed || !strings.Contains(errOut, "is damaged or is not a studio database") || !strings.Contains(errOut, "restore it from a backup") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}
