package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegationstudio/studio/internal/trace"
	"github.com/delegationstudio/studio/internal/view/viewtest"
)

// TestOTLPRoundTrip exports lessons' sessions as OTLP/JSON, imports them
// back, and compares the two sessions agent by agent and call by call: the
// same name, agents, calls and their tokens, files, receipts and notes.
func TestOTLPRoundTrip(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "s.db")
	for _, lesson := range []string{"one-delegation", "files-and-todos", "order-number"} {
		t.Run(lesson, func(t *testing.T) {
			if code, _, errOut := studio(t, "run", "lesson:"+lesson, "--db", dbPath); code != exitOK {
				t.Fatalf("run: %d %s", code, errOut)
			}
			_, list, _ := studio(t, "sessions", "--db", dbPath)
			var id string
			for _, line := range strings.Split(list, "\n") {
				if f := strings.Fields(line); len(f) > 3 && f[3] == lesson { // id, status, origin, name
					id = f[0]
				}
			}
			code, doc, errOut := studio(t, "export", id, "--format", "otlp", "--db", dbPath)
			if code != exitOK {
				t.Fatalf("export: %d %s", code, errOut)
			}
			code, out, errOut := studio(t, "import", writeFile(t, doc), "--db", dbPath)
			if code != exitOK {
				t.Fatalf("import: %d %s", code, errOut)
			}
			orig, back := storedTrace(t, dbPath, id), storedTrace(t, dbPath, strings.TrimSpace(out))
			viewtest.SameSession(t, "OTLP through the binary", orig, back)
		})
	}
}

func storedTrace(t *testing.T, dbPath, id string) *trace.Trace {
	t.Helper()
	code, out, errOut := studio(t, "export", id, "--db", dbPath)
	if code != exitOK {
		t.Fatalf("export %s: %d %s", id, code, errOut)
	}
	tr, _, err := trace.Parse([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}
