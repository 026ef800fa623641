package lessons

import (
	"fmt"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
)

var pipeline = lessonDef{
	name:    "pipeline",
	title:   "Pipeline: write, review, fix — handing over artifacts",
	article: "Article 3 (subagent patterns), §2",
	description: "Article 3 (subagent patterns), §2, the pipeline: a writer, a reviewer and a fixer in a row, each an " +
		"isolated subagent. Look at the task descriptions: each stage's holds the previous stages' full output, " +
		"because an isolated child sees nothing else — the hand-over is the artifact, not the chat history.",
	bothModes: true,
	table:     pipelineTable,
}

func pipelineTable(r runs) (Table, error) {
	v := r.view("pipeline")
	stages := []struct{ stage, name string }{{"write", "writer"}, {"review", "reviewer"}, {"fix", "fixer"}}
	var ds []*delegationRun
	for _, s := range stages {
		d, err := oneChild(v, s.name)
		if err != nil {
			return Table{}, err
		}
		ds = append(ds, d)
	}
	tab := Table{
		Title:   "Three stages, and what each one's task description carried",
		Columns: []string{"stage", "subagent", "task (characters)", "holds the previous output in full?", "the child's context", "receipt"},
	}
	holds := func(i int) (all bool, what []string) {
		all = true
		for j := 0; j < i; j++ {
			if strings.Contains(ds[i].task, ds[j].receipt.Content) {
				what = append(what, stages[j].name+"'s")
			} else {
				all = false
			}
		}
		return all, what
	}
	isolatedOK := true
	for i, d := range ds {
		c, err := v.firstCall(d.child.ID)
		if err != nil {
			return Table{}, err
		}
		ctx := v.context(c)
		isolatedOK = isolatedOK && len(ctx) == 1 && ctx[0].Content == d.task
		cell := "–"
		if i > 0 {
			all, what := holds(i)
			cell = yesNo(all) + ": " + strings.Join(what, " and ")
		}
		tab.Rows = append(tab.Rows, []string{fmt.Sprintf("%d. %s", i+1, stages[i].stage), stages[i].name, itoa(chars(d.task)), cell,
			fmt.Sprintf("%d message: its task", len(ctx)), clip(d.receipt.Content, 60)})
	}
	tab.Article = &ArticleTable{
		Columns: []string{"pattern", "structure", "use it for", "the point"},
		Rows: [][]string{{"pipeline", "A's output is B's input, in series", "write code → review → fix",
			"hand over structured artifacts: the downstream task holds the upstream artifact in full"}},
	}
	tab.Note = "The article states the pattern without a measurement; this run shows it holding."
	var order []string
	for _, ev := range v.t.Events {
		switch ev.Type {
		case delegation.EventDelegationStarted:
			order = append(order, "start")
		case delegation.EventDelegationFinished:
			order = append(order, "finish")
		}
	}
	revAll, _ := holds(1)
	fixAll, _ := holds(2)
	tab.Checks = append(tab.Checks,
		check("the stages ran one after another: each started after the previous one finished",
			strings.Join(order, ",") == "start,finish,start,finish,start,finish", "%s", strings.Join(order, ", ")),
		check("the reviewer's task holds the writer's whole output", revAll, "writer's receipt: %d characters", chars(ds[0].receipt.Content)),
		check("the fixer's task holds the code and the whole review", fixAll, "review: %d characters", chars(ds[1].receipt.Content)),
		check("each stage is isolated: its context is its task alone, so the artifact reached it only through the description",
			isolatedOK, "first calls of writer, reviewer, fixer: one message each"),
		check("the reviewer found the bug because the code was in its task", strings.Contains(ds[1].receipt.Content, "1900"),
			"%q", clip(ds[1].receipt.Content, 80)),
	)
	tab.Versus = []Versus{
		{What: "structure", Article: "A's output is B's input, in series", Ours: fmt.Sprintf("%d stages, one after another", len(ds)),
			Why: "the article states the pattern; the run follows it"},
		{What: "the hand-over", Article: "the downstream task holds the upstream artifact in full", Ours: tab.Rows[len(tab.Rows)-1][3],
			Why: "an isolated child sees nothing but its task, so the task must carry the artifact"},
	}
	return tab, nil
}
