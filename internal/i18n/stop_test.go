package i18n

import (
	"testing"

	"github.com/delegationstudio/studio/internal/delegation"
)

// TestStopKey: every stop code the engine writes has words of its own in
// every language; one it does not know reads as stopped from outside.
func TestStopKey(t *testing.T) {
	for _, code := range []string{delegation.StopUser, delegation.StopShutdown, delegation.StopSignal, delegation.StopLapsed} {
		key := StopKey(code)
		if key == StopKey("") {
			t.Errorf("stop code %q has no message of its own", code)
		}
		for _, lang := range []string{English, "zh"} {
			if Get(lang).Raw(key) == "" {
				t.Errorf("%s: no %s", lang, key)
			}
		}
	}
	if Get(English).T(StopKey("someday")) != "it was stopped from outside" {
		t.Error("an unknown code is not worded as stopped from outside")
	}
}

// TestErrorKey: the error code a failed session's end carries has words of
// its own in every language; other codes have none, so the stored error is
// said.
func TestErrorKey(t *testing.T) {
	key := ErrorKey(delegation.EFULL)
	if key == "" {
		t.Fatalf("code %q has no message of its own", delegation.EFULL)
	}
	for _, lang := range []string{English, "zh"} {
		if Get(lang).Raw(key) == "" {
			t.Errorf("%s: no %s", lang, key)
		}
	}
	if k := ErrorKey(delegation.EINVALID); k != "" {
		t.Errorf("code %q worded as %s; want none", delegation.EINVALID, k)
	}
}
