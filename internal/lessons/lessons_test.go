package lessons

import (
	"context"
	"strings"
	"testing"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/session"
)

func TestEveryLessonRuns(t *testing.T) {
	all := All()
	if len(all) == 0 {
		t.Fatal("no lessons")
	}
	for _, l := range all {
		t.Run(l.Name, func(t *testing.T) {
			t.Parallel() // lessons wait out their delays, made for watching
			if l.Title == "" || len(l.Description) < 80 {
				t.Fatalf("lesson %s needs a title and an explanation", l.Name)
			}
			sc, err := scenario.Parse(l.Scenario)
			if err != nil {
				t.Fatalf("invalid: %v", err)
			}
			if len(sc.Warnings) > 0 {
				t.Fatalf("warnings: %v", sc.Warnings)
			}
			res, err := session.Run(context.Background(), sc, session.RunOptions{})
			if err != nil || res.Status != delegation.StatusDone {
				t.Fatalf("run: %v %+v", err, res)
			}
		})
	}
}

func TestGet(t *testing.T) {
	if _, err := Get("order-number"); err != nil {
		t.Fatal(err)
	}
	if _, err := Get("nope"); err == nil || !strings.Contains(err.Error(), "order-number") {
		t.Fatalf("err = %v", err)
	}
}
