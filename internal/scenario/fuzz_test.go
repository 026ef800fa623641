package scenario_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/session"
)

// FuzzScenario feeds documents to the scenario reader: it never panics,
// rejects with field errors, and what it accepts runs without a panic (cut
// short, since a script may wait).
func FuzzScenario(f *testing.F) {
	if doc, err := os.ReadFile("../../examples/order-number.json"); err == nil {
		f.Add(doc)
	}
	f.Add([]byte(`{"name":"x","prompt":"y","script":{"main":[{"content":"ok"}]}}`))
	f.Add([]byte(`{"name":"x","prompt":"y","subagents":[{"name":"a","description":"d","mode":"fork","skills":["s"]}],"script":{"main":[{"content":"ok"}]}}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		sc, err := scenario.Parse(doc)
		if err != nil {
			var fe delegation.FieldErrors
			if !errors.As(err, &fe) || len(fe) == 0 {
				t.Fatalf("a rejection must be field errors: %T %v", err, err)
			}
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		res, err := session.Run(ctx, sc, session.RunOptions{})
		if err == nil && res == nil {
			t.Fatal("no result")
		}
	})
}
