package main

import (
	"fmt"
	"io"
	"unicode/utf8"
)

// safeWriter escapes what a terminal would obey rather than show: control
// characters but newline and tab (ESC starts the sequences that retitle a
// window, move the cursor or rewrite the screen), C1 controls, bidirectional
// overrides (which reorder what is shown), and bytes that are not UTF-8.
// Names, prompts, answers and errors printed by the CLI are the scenario's,
// a model's or a trace's; they are shown, never run.
//
// The escapes are JSON's (\u001b) for characters, so a JSON document that
// goes through it stays valid and means the same; a byte that is not UTF-8
// (never in our JSON) is shown as \x9b.
type safeWriter struct {
	w       io.Writer
	pending []byte // the start of a character cut by the end of a Write
	out     []byte
}

func newSafeWriter(w io.Writer) *safeWriter { return &safeWriter{w: w} }

func (s *safeWriter) Write(p []byte) (int, error) {
	n := len(p)
	if len(s.pending) > 0 {
		p = append(s.pending, p...)
		s.pending = nil
	}
	s.out = s.out[:0]
	for i := 0; i < len(p); {
		c := p[i]
		if c >= 0x20 && c < 0x7f || c == '\n' || c == '\t' {
			s.out = append(s.out, c)
			i++
			continue
		}
		if c < utf8.RuneSelf {
			s.out = fmt.Appendf(s.out, `\u%04x`, c)
			i++
			continue
		}
		if !utf8.FullRune(p[i:]) {
			s.pending = append([]byte(nil), p[i:]...)
			break
		}
		r, size := utf8.DecodeRune(p[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			s.out = fmt.Appendf(s.out, `\x%02x`, c)
		case unsafeRune(r):
			s.out = fmt.Appendf(s.out, `\u%04x`, r)
		default:
			s.out = append(s.out, p[i:i+size]...)
		}
		i += size
	}
	if _, err := s.w.Write(s.out); err != nil {
		return 0, err
	}
	return n, nil
}

// flush writes a character left cut at the end, as the bytes it is.
func (s *safeWriter) flush() {
	if len(s.pending) > 0 {
		p := s.pending
		s.pending = nil
		for _, c := range p {
			fmt.Fprintf(s.w, `\x%02x`, c)
		}
	}
}

func unsafeRune(r rune) bool {
	return r >= 0x80 && r <= 0x9f || // C1 controls: CSI, OSC, …
		r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 // bidirectional embeddings, overrides, isolates
}
