package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestSafeWriter(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, ├─ tree and 漢字\n\ttab": "plain text, ├─ tree and 漢字\n\ttab",
		"\x1b]0;x\x07title":                 `\u001b]0;x\u0007title`,
		"\x1b[2J\r":                         `\u001b[2J\u000d`,
		"c1 \u009b31m":                      `c1 \u009b31m`,
		"bidi \u202egnp.exe":                `bidi \u202egnp.exe`,
		"bad \x9b byte":                     `bad \x9b byte`,
		"del \x7f":                          `del \u007f`,
	} {
		var b bytes.Buffer
		w := newSafeWriter(&b)
		// Byte by byte: a character cut between two writes is kept whole.
		for i := 0; i < len(in); i++ {
			if _, err := w.Write([]byte{in[i]}); err != nil {
				t.Fatal(err)
			}
		}
		w.flush()
		if b.String() != want {
			t.Errorf("%q came out %q, want %q", in, b.String(), want)
		}
	}
	t.Run("JSON stays JSON and means the same", func(t *testing.T) {
		doc, _ := json.Marshal(map[string]string{"a": "\u009b\u202e\x7f\x1b ok"})
		var b bytes.Buffer
		w := newSafeWriter(&b)
		w.Write(doc)
		w.flush()
		var back map[string]string
		if err := json.Unmarshal(b.Bytes(), &back); err != nil || back["a"] != "\u009b\u202e\x7f\x1b ok" {
			t.Fatalf("%s: %v %q", b.String(), err, back["a"])
		}
		if strings.ContainsAny(b.String(), "\u009b\u202e\x7f\x1b") {
			t.Fatalf("raw controls in %q", b.String())
		}
	})
}

// Finding 9 of issue 21: the CLI printed names, prompts and answers with
// their terminal escape sequences.
func TestRunPrintsNoRawEscape(t *testing.T) {
	p := writeFile(t, `{"name": "esc\u001b[31m", "prompt": "hi \u001b]0;x\u0007 there",
		"subagents": [{"name": "helper", "description": "d"}],
		"script": {"main": [{"tool_calls": [{"name": "task", "args": {"description": "do \u001b[2J it", "subagent_type": "helper"}}]}, {"content": "done \u009b1m"}],
		           "helper": [[{"content": "ok \u202e"}]]}}`)
	code, out, errOut := studio(t, "run", p)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.ContainsAny(out+errOut, "\x1b\x07\u009b\u202e") {
		t.Fatalf("raw control characters in the output:\n%q", out)
	}
	if !strings.Contains(out, `prompt: hi \u001b]0;x\u0007 there`) {
		t.Fatalf("the prompt is not shown escaped:\n%s", out)
	}
}
