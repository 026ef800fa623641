package lessons

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
)

var reviewLoop = lessonDef{
	name:    "review-loop",
	title:   "Review loop: a structured verdict, at most three rounds",
	article: "Article 3 (subagent patterns), §2",
	description: "Article 3 (subagent patterns), §2, the review loop: a writer and a separate reviewer, looped by the " +
		"parent for at most three rounds. Look at the verdicts: the reviewer answers through response_format " +
		"Verdict, JSON the parent can act on; it rejects twice with specific issues, each passed in full to the " +
		"next writer, and approves the third draft.",
	bothModes: true,
	table:     reviewLoopTable,
}

// verdict is the reviewer's structured response.
type verdict struct {
	Approved *bool     `json:"approved"`
	Issues   *[]string `json:"issues"`
}

func reviewLoopTable(r runs) (Table, error) {
	const maxRounds = 3
	v := r.view("review-loop")
	writers, reviewers := v.agents("writer"), v.agents("reviewer")
	if len(writers) != len(reviewers) || len(writers) == 0 {
		return Table{}, fmt.Errorf("want one writer and one reviewer a round, got %d and %d", len(writers), len(reviewers))
	}
	tab := Table{
		Title:   "Each round: the draft, and the reviewer's verdict",
		Columns: []string{"round", "the writer's task carried", "the draft", "verdict (the receipt)", "approved", "issues"},
	}
	var (
		approvals    []bool
		allParse     = true
		carried      = true
		separate     = true
		lastIssues   []string
		reviewerOnly = true
	)
	for i := range writers {
		w, err := childRun(v, writers[i])
		if err != nil {
			return Table{}, err
		}
		rv := reviewers[i]
		rr, err := v.receipt(rv)
		if err != nil {
			return Table{}, err
		}
		var vd verdict
		parses := json.Unmarshal([]byte(rr.Content), &vd) == nil && vd.Approved != nil && vd.Issues != nil
		allParse = allParse && parses
		approved := parses && *vd.Approved
		approvals = append(approvals, approved)
		what := "the brief"
		if i > 0 {
			what = "the brief, the previous draft"
			for _, issue := range lastIssues {
				if !strings.Contains(w.task, issue) {
					carried = false
				}
			}
			if len(lastIssues) > 0 {
				what += fmt.Sprintf(", %d issue(s)", len(lastIssues))
			}
		}
		issues := []string{}
		if parses {
			issues = *vd.Issues
		}
		lastIssues = issues
		// Separate contexts: the reviewer sees only its task, which holds the draft.
		c, err := v.firstCall(rv.ID)
		if err != nil {
			return Table{}, err
		}
		ctx := v.context(c)
		separate = separate && rv.ID != w.child.ID && len(ctx) == 1 && strings.Contains(ctx[0].Content, w.receipt.Content) &&
			v.occurrences(c, "Write the text you are asked for") == 0
		reviewerOnly = reviewerOnly && hasToolNamed(rv.Tools, "Verdict") && !hasToolNamed(w.child.Tools, "Verdict")
		tab.Rows = append(tab.Rows, []string{itoa(i + 1), what, clip(w.receipt.Content, 60), rr.Content, yesNo(approved), strings.Join(issues, " / ")})
	}
	tab.Article = &ArticleTable{
		Columns: []string{"pattern", "structure", "use it for", "the point"},
		Rows: [][]string{{"review loop", "producer ↔ reviewer, looped until it passes", "quality-sensitive work (code, documents)",
			"the reviewer decides, with a structured verdict (pass / fail + the issues); cap the rounds (e.g. 3)"}},
	}
	tab.Note = "The article states the pattern without a measurement; the drafts and issues are ours."
	n := len(approvals)
	tab.Checks = append(tab.Checks,
		check("every verdict is JSON with a boolean approved and a list of issues", allParse, "%d verdicts", n),
		check(fmt.Sprintf("the loop stopped within %d rounds", maxRounds), n <= maxRounds, "%d rounds", n),
		check("the reviewer rejected twice and approved the third time",
			n == 3 && !approvals[0] && !approvals[1] && approvals[2] && len(lastIssues) == 0, "approved: %v", approvals),
		check("each rejection's issues went in full into the next writer's task", carried, "the writer's tasks of rounds 2 and 3"),
		check("writer and reviewer are separate contexts: the reviewer sees only the draft it was sent", separate,
			"each reviewer's first call: one message, holding the draft; none of the writer's prompt"),
		check("only the reviewer has the Verdict tool: the decision is the reviewer's", reviewerOnly, "reviewer tools: %s",
			strings.Join(toolNames(reviewers[0].Tools), ", ")),
	)
	main, _ := v.agent("main")
	tab.Checks = append(tab.Checks, check("the parent ended once approved", v.t.Session.Status == delegation.StatusDone &&
		len(v.turns(main.ID)) == 2*n+1, "%d parent calls for %d rounds", len(v.turns(main.ID)), n))
	tab.Versus = []Versus{
		{What: "who decides", Article: "the reviewer, with a structured verdict (pass / fail + the issues)", Ours: "the reviewer's Verdict: " + tab.Rows[len(tab.Rows)-1][3],
			Why: "the same: its response_format makes the verdict JSON the parent can act on"},
		{What: "rounds", Article: "capped (e.g. 3)", Ours: fmt.Sprintf("%d, approved in the last", len(tab.Rows)),
			Why: "the parent's script stops at the first approval, within the cap"},
	}
	return tab, nil
}
