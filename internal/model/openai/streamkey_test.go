package openai

import (
	"strings"
	"testing"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/delegationstudio/studio/internal/model/remote"
)

// A streamed answer that echoes the endpoint's key, split across deltas,
// shows no piece of it live, and its content is the whole with the key
// redacted.
func TestStreamedContentHoldsTheKeyBack(t *testing.T) {
	const key = "sk-live-0123456789"
	acc := accumulator{hold: remote.NewKeyHold(key)}
	var shown strings.Builder
	for _, piece := range []string{"Your key: sk-li", "ve-01234", "56789 and sk-", "l", ""} {
		chunk := goopenai.ChatCompletionStreamResponse{Choices: []goopenai.ChatCompletionStreamChoice{{Delta: goopenai.ChatCompletionStreamChoiceDelta{Content: piece}}}}
		for _, d := range acc.add(chunk) {
			if strings.Contains(d, "sk-live-") {
				t.Fatalf("a delta shows the key's start: %q", d)
			}
			shown.WriteString(d)
		}
	}
	for _, d := range acc.rest() {
		shown.WriteString(d)
	}
	const want = "Your key: [redacted] and sk-l"
	if shown.String() != want || acc.result().content != want {
		t.Fatalf("shown %q, recorded %q; want %q", shown.String(), acc.result().content, want)
	}
}
