package remote_test

import (
	"strings"
	"testing"

	"github.com/delegationstudio/studio/internal/model/remote"
)

// Whatever the pieces a text arrives in, what KeyHold lets out, with its
// rest, is the whole text with the key redacted; and what it lets out of
// any piece never holds a piece of the key that does not end the text.
func TestKeyHoldRedactsAKeySplitAnywhere(t *testing.T) {
	const key = "sk-hold0123456789"
	for _, text := range []string{"a " + key + " b", key, "sk-h then " + key + key + " and sk-ho", "sk-hol", "ss" + key + "s"} {
		want := string(remote.RedactKey([]byte(text), key))
		for i := 0; i <= len(text); i++ {
			for j := i; j <= len(text); j++ {
				h := remote.NewKeyHold(key)
				var got strings.Builder
				for _, p := range []string{text[:i], text[i:j], text[j:]} {
					out := h.Next(p)
					if strings.Contains(out, key) {
						t.Fatalf("%q cut at %d, %d: a piece went out with the key: %q", text, i, j, out)
					}
					got.WriteString(out)
				}
				got.WriteString(h.Rest())
				if got.String() != want {
					t.Fatalf("%q cut at %d, %d: let out %q, want %q", text, i, j, got.String(), want)
				}
			}
		}
	}
}

// Text that cannot be the key's start is not held.
func TestKeyHoldHoldsOnlyTheKeysStart(t *testing.T) {
	h := remote.NewKeyHold("sk-abc")
	if got := h.Next("ask"); got != "a" || !h.Holding() {
		t.Errorf("Next(ask) = %q, holding %v; want a, sk held", got, h.Holding())
	}
	if got := h.Next("-x"); got != "sk-x" || h.Holding() {
		t.Errorf("Next(-x) = %q, holding %v; want sk-x, nothing held", got, h.Holding())
	}
	if got := remote.NewKeyHold("").Next("sk-a"); got != "sk-a" {
		t.Errorf("no key: Next(sk-a) = %q", got)
	}
}

// An event is read only when one of its strings may end with the key's
// start: a member name that does, or a string that merely holds an s, is
// not such a string.
func TestMayEndInKeyStart(t *testing.T) {
	const key = "sk-hold0123456789"
	for b, want := range map[string]bool{
		`{"content":"a sk-ho"}`:                true,
		`{"content": "and s" }`:                true,
		`{"choices":[{"delta":{"x":"sk-a"}}]}`: false,
		`{"choices" : [], "content":"sk-hx"}`:  false,
		`{"content":"sk-hold0123456789"}`:      false, // whole: RedactKey's, not held
	} {
		if got := remote.MayEndInKeyStart([]byte(b), key); got != want {
			t.Errorf("MayEndInKeyStart(%s) = %v, want %v", b, got, want)
		}
	}
	if !remote.MayEndInKeyStart([]byte(`{}`), `sk-"x`) {
		t.Error("a key JSON may escape: every event must be read")
	}
}
