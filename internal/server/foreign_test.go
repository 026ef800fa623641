package server

import "testing"

func TestDocumentKind(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{`{"name": "x", "prompt": "go"}`, docScenario},
		{`{"format": "delegation-studio.trace", "version": 1}`, docTrace},
		{`{"resourceSpans": []}`, docOTLPJSON},
		{"\x0a\x05hello", docOTLPProto},
		{`{"hello": 1}`, docJSON},
		{`[1, 2]`, docJSON},
		{`name: x`, docText},
		{`{"name": "x", "prompt": `, docText},
		{``, ""},
	} {
		if got := documentKind([]byte(c.doc)); got != c.want {
			t.Errorf("documentKind(%q) = %q, want %q", c.doc, got, c.want)
		}
	}
}
