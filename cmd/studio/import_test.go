package main

import (
	"encoding/json"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// exportedShape is what an exported trace says of its agents and messages.
type exportedShape struct {
	Session struct {
		Status string `json:"status"`
		Origin *struct {
			Kind       string `json:"kind"`
			Convention string `json:"convention"`
		} `json:"origin"`
	} `json:"session"`
	Agents []struct {
		Name string  `json:"name"`
		Mode *string `json:"mode"`
	} `json:"agents"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
		Kind    string `json:"kind"`
	} `json:"messages"`
}

func exportShape(t *testing.T, dbPath, id string) exportedShape {
	t.Helper()
	code, out, errOut := studio(t, "export", id, "--db", dbPath)
	if code != exitOK {
		t.Fatalf("export %s: exit %d: %s", id, code, errOut)
	}
	var s exportedShape
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s exportedShape) agents() string {
	var out []string
	for _, a := range s.Agents {
		m := "-"
		if a.Mode != nil {
			m = *a.Mode
		}
		out = append(out, a.Name+"/"+m)
	}
	// A received child is listed when its first call is seen, which need
	// not be in tool-call order.
	sort.Strings(out[min(1, len(out)):])
	return strings.Join(out, " ")
}

func TestImportOTLP(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "s.db")
	for _, file := range []string{"../../internal/ingest/testdata/deepagents.otlp.pb", "../../internal/ingest/testdata/deepagents.otlp.json"} {
		t.Run("an OTLP file from deepagents: "+filepath.Ext(file), func(t *testing.T) {
			code, out, errOut := studio(t, "import", file, "--db", dbPath)
			ids := strings.Fields(out)
			if code != exitOK || len(ids) != 1 {
				t.Fatalf("exit %d: %q %s", code, out, errOut)
			}
			s := exportShape(t, dbPath, ids[0])
			if got := s.agents(); got != "main/- forker/fork general-purpose/isolated" {
				t.Errorf("agents: %s", got)
			}
			if s.Session.Origin == nil || s.Session.Origin.Kind != "otlp" || s.Session.Origin.Convention != "openinference" {
				t.Errorf("origin: %+v", s.Session.Origin)
			}
		})
	}
	t.Run("our own OTLP export round-trips into an equivalent session", func(t *testing.T) {
		code, _, errOut := studio(t, "run", "lesson:received-deepagents", "--db", dbPath)
		if code != exitOK {
			t.Fatalf("run: %d %s", code, errOut)
		}
		_, list, _ := studio(t, "sessions", "--db", dbPath)
		var id string
		for _, line := range strings.Split(list, "\n") {
			if f := strings.Fields(line); len(f) > 3 && f[3] == "received-deepagents" { // id, status, origin, name
				id = f[0]
			}
		}
		code, otlpDoc, errOut := studio(t, "export", id, "--format", "otlp", "--db", dbPath)
		if code != exitOK {
			t.Fatalf("export: %d %s", code, errOut)
		}
		code, out, errOut := studio(t, "import", writeFile(t, otlpDoc), "--db", dbPath)
		if code != exitOK {
			t.Fatalf("import: %d %s", code, errOut)
		}
		orig, back := exportShape(t, dbPath, id), exportShape(t, dbPath, strings.TrimSpace(out))
		if orig.agents() != back.agents() || len(orig.Messages) != len(back.Messages) {
			t.Fatalf("agents %s vs %s; %d vs %d messages", orig.agents(), back.agents(), len(orig.Messages), len(back.Messages))
		}
		count := func(s exportedShape) map[string]int {
			m := map[string]int{}
			for _, msg := range s.Messages {
				m[msg.Role+"/"+msg.Kind+"/"+msg.Content]++
			}
			return m
		}
		o, b := count(orig), count(back)
		for k, n := range o {
			if b[k] != n {
				t.Errorf("message %q: %d in the run, %d received back", k, n, b[k])
			}
		}
	})
	t.Run("a file that is neither exits 2 and writes nothing", func(t *testing.T) {
		_, before, _ := studio(t, "sessions", "--db", dbPath)
		code, _, errOut := studio(t, "import", writeFile(t, "\x0a\xff\x01garbage"), "--db", dbPath)
		if code != exitUsage || !strings.Contains(errOut, "not an OTLP ExportTraceServiceRequest in protobuf") {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		if _, after, _ := studio(t, "sessions", "--db", dbPath); after != before {
			t.Errorf("sessions changed:\n%s", after)
		}
	})
}
