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
