package delegation

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Finding 6 of issue 21: a response_format's $refs were resolved by the
// schema library's file loader against the server's working directory,
// telling whether a file exists, leaking its first byte, and hanging on a
// FIFO.
func TestResponseFormatRefsStayInside(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret.json")
	if err := os.WriteFile(secret, []byte(`{"type": "string", "description": "TOP-SECRET-CONTENT"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for name, ref := range map[string]string{
		"an absolute path":            "/etc/passwd",
		"a file URL":                  "file://" + secret,
		"a relative path":             "secret.json",
		"a FIFO, which must not hang": fifo,
		"a URL":                       "http://127.0.0.1:1/schema.json",
	} {
		t.Run(name, func(t *testing.T) {
			rf := `{"title": "Answer", "type": "object", "properties": {"x": {"$ref": ` + quote(ref) + `}}}`
			fe := teamErrors(t, TeamSpec{Subagents: []Spec{{Name: "a", Description: "d", ResponseFormat: json.RawMessage(rf)}}})
			if len(fe) != 1 || fe[0].Field != "subagents[0].response_format" {
				t.Fatalf("errors = %v", fe)
			}
			msg := fe[0].Message
			if !strings.Contains(msg, "points outside it; only references within it") {
				t.Fatalf("message %q does not say the $ref is refused", msg)
			}
			if strings.Contains(msg, "TOP-SECRET") || strings.Contains(msg, "invalid character") || strings.Contains(msg, "no such file") {
				t.Fatalf("message %q tells something of the host's files", msg)
			}
		})
	}
	t.Run("an $id that points at the host's files", func(t *testing.T) {
		rf := `{"$id": "file://` + dir + `/", "title": "Answer", "type": "object", "properties": {"x": {"$ref": "secret.json"}}}`
		fe := teamErrors(t, TeamSpec{Subagents: []Spec{{Name: "a", Description: "d", ResponseFormat: json.RawMessage(rf)}}})
		if len(fe) != 1 || !strings.Contains(fe[0].Message, "points outside it") {
			t.Fatalf("errors = %v", fe)
		}
	})
	t.Run("a $schema that points at the host's files", func(t *testing.T) {
		rf := `{"$schema": "file://` + secret + `", "title": "Answer", "type": "object"}`
		fe := teamErrors(t, TeamSpec{Subagents: []Spec{{Name: "a", Description: "d", ResponseFormat: json.RawMessage(rf)}}})
		if len(fe) != 1 || strings.Contains(fe[0].Message, "TOP-SECRET") {
			t.Fatalf("errors = %v", fe)
		}
	})
	t.Run("a reference within the schema works", func(t *testing.T) {
		rf := `{"title": "Answer", "type": "object", "$defs": {"n": {"type": "integer"}}, "properties": {"x": {"$ref": "#/$defs/n"}}, "required": ["x"]}`
		team := mustTeam(t, TeamSpec{Subagents: []Spec{{Name: "a", Description: "d", ResponseFormat: json.RawMessage(rf)}}})
		st := team.Subagent("a").structured
		if st == nil {
			t.Fatal("no structured tool")
		}
		if _, err := st.check(json.RawMessage(`{"x": 3}`)); err != nil {
			t.Fatalf("a valid answer: %v", err)
		}
		if _, err := st.check(json.RawMessage(`{"x": "three"}`)); err == nil {
			t.Fatal("an answer the local $ref forbids was accepted")
		}
	})
}

func teamErrors(t *testing.T, ts TeamSpec) FieldErrors {
	t.Helper()
	_, err := BuildTeam(ts)
	var fe FieldErrors
	if !errors.As(err, &fe) {
		t.Fatalf("BuildTeam error = %v, want FieldErrors", err)
	}
	return fe
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
