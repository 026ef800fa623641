package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/delegationstudio/studio/internal/model/openai/openaitest"
	"github.com/delegationstudio/studio/internal/otlp"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/schema"
)

// TestReasoningAndCutOffAnswers: a reasoning model's thinking is shown as its
// own part of the message and exported as a reasoning part; an answer cut off
// at the length limit is an error on its call, shown on the page and in the
// trace, and its child's receipt says so instead of passing the cut answer on.
func TestReasoningAndCutOffAnswers(t *testing.T) {
	ep := openaitest.NewServer(t, openaitest.ThinkerAndRambler)
	s := newStudio(t, "")
	sc, err := scenario.Parse([]byte(openaitest.ThinkerAndRamblerScenario(ep.URL + "/v1")))
	if err != nil {
		t.Fatal(err)
	}
	id, res, err := (&session.Runner{DB: s.db}).Run(context.Background(), sc)
	if err != nil || res.Status != "done" {
		t.Fatalf("run: %v %+v", err, res)
	}
	tr, err := s.db.Trace(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("the trace keeps the reasoning and the endpoint's detailed counts", func(t *testing.T) {
		found := false
		for _, m := range tr.Messages {
			if m.Reasoning == "Six sevens: 7, 14, 21, 28, 35, 42." && m.Content == "42" {
				found = true
			}
		}
		if !found {
			t.Fatalf("no message with the reasoning: %+v", tr.Messages)
		}
		u := tr.ModelCalls[0].Usage
		if u == nil || u.CachedTokens != 768 || u.ReasoningTokens != 96 {
			t.Errorf("usage %+v", u)
		}
		doc, err := json.Marshal(tr)
		if err != nil {
			t.Fatal(err)
		}
		if errs := schema.ValidateTrace(doc); len(errs) > 0 {
			t.Errorf("the trace does not validate against the published schema: %v", errs)
		}
	})
	t.Run("the cut-off answer is an error on its call and in its receipt", func(t *testing.T) {
		var callErr, receipt string
		for _, c := range tr.ModelCalls {
			if strings.Contains(c.Error, `finish_reason "length"`) {
				callErr = c.Error
			}
		}
		for _, m := range tr.Messages {
			if m.Kind == "receipt" && m.IsError {
				receipt = m.Content
			}
		}
		if !strings.Contains(callErr, "the answer was cut off at the length limit") || !strings.Contains(callErr, `"The answer is trunc"`) {
			t.Errorf("call error %q", callErr)
		}
		if !strings.Contains(receipt, "cut off") {
			t.Errorf("receipt %q: the parent must learn the answer was cut", receipt)
		}
	})
	t.Run("the page shows both", func(t *testing.T) {
		var thinker string
		for _, a := range tr.Agents {
			if a.Name == "thinker" {
				thinker = a.ID
			}
		}
		_, doc := s.get("/sessions/" + id + "?agent=" + thinker)
		if got := doc.Find(`[data-testid="reasoning"] pre`).Text(); got != "Six sevens: 7, 14, 21, 28, 35, 42." {
			t.Errorf("reasoning part %q", got)
		}
		if got := doc.Find(`#timeline .bar.error title`).Text(); !strings.Contains(got, `finish_reason "length"`) {
			t.Errorf("timeline error %q", got)
		}
	})
	t.Run("OTLP exports the reasoning as a reasoning part", func(t *testing.T) {
		out, err := otlp.Export(tr)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), `{\"type\":\"reasoning\",\"content\":\"Six sevens: 7, 14, 21, 28, 35, 42.\"}`) {
			t.Errorf("no reasoning part in %s", out)
		}
		if !strings.Contains(string(out), "gen_ai.usage.cache_read.input_tokens") {
			t.Error("no cached token count")
		}
	})
}
