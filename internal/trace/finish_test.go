package trace_test

import (
	"encoding/json"
	"testing"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

// A log written before agent.finished carried its code is read by the
// engine's error texts of then; a code given is kept.
func TestAgentFinishedCode(t *testing.T) {
	for _, c := range []struct{ data, want string }{
		{`{"status": "failed", "error": "it reached its step limit of 2 model calls before giving a final answer", "steps": 2, "receipt": ""}`, delegation.FinishStepLimit},
		{`{"status": "failed", "error": "it was cancelled: the studio is stopping", "steps": 1, "receipt": ""}`, delegation.FinishCancelled},
		{`{"status": "failed", "error": "model error: context canceled", "steps": 1, "receipt": ""}`, delegation.FinishCancelled},
		{`{"status": "failed", "error": "model error: 503", "steps": 1, "receipt": ""}`, ""},
		{`{"status": "failed", "error": "whatever it says", "code": "step_limit", "steps": 1, "receipt": ""}`, delegation.FinishStepLimit},
		{`{"status": "done", "steps": 1, "receipt": "ok"}`, ""},
	} {
		st, err := trace.StepOf(delegation.Event{Seq: 1, Type: delegation.EventAgentFinished, AgentID: "a1", Data: json.RawMessage(c.data)})
		if err != nil {
			t.Fatal(err)
		}
		if st.AgentFinished == nil || st.AgentFinished.Code != c.want {
			t.Errorf("%s: code %+v; want %q", c.data, st.AgentFinished, c.want)
		}
	}
}
