package lessons

import (
	"fmt"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
)

var bigReads = lessonDef{
	name:    "big-reads",
	title:   "A child's big reads stay in the child, and a file keeps a big receipt out",
	article: "Article 1 (the task tool), §4; Article 3 (subagent patterns), §1",
	description: "Article 1 (the task tool), §4, and Article 3 (subagent patterns), §1: a long log read by the main agent, " +
		"by a child that answers in one sentence, and by a child that sends all of it back. Read by the main agent, the log " +
		"stays in every later call of the main agent, cut by read_file at deepagents' size limit; read by a child, it stays " +
		"in the child; sent back whole, the receipt is too big for the parent's model, and deepagents' FilesystemMiddleware " +
		"moves it to a file and hands the parent a pointer with a preview. Look at the parent's last context in each, and at " +
		"what the file kept out.",
	variants: []variantDef{
		{name: "alone", label: "The big log, read by the main agent"},
		{name: "delegated", label: "Read by a child, one sentence back"},
		{name: "everything-back", label: "Read by a child, all of it back"},
	},
	table: bigReadsTable,
}

// bigRead is one run of the big-reads lesson, measured.
type bigRead struct {
	parentLast, childLast int // the last call's system prompt and messages
	readChars             int // the first read_file result, as the model got it
	readCut               bool
	readOn                bool // the cut read says where to read on
	evicted               *delegation.Eviction
	pointer               int // the evicted receipt's pointer, in tokens
	laterCalls            int // the parent's calls that read the pointer
}

func readBig(v *view) (bigRead, error) {
	var b bigRead
	main, err := v.agent("main")
	if err != nil {
		return b, err
	}
	turns := v.turns(main.ID)
	if len(turns) == 0 {
		return b, fmt.Errorf("the main agent made no call")
	}
	b.parentLast = contextTokens(turns[len(turns)-1])
	reader := main.ID
	if kids := v.agents(delegation.GeneralPurposeName); len(kids) > 0 {
		child := kids[0]
		reader = child.ID
		ct := v.turns(child.ID)
		if len(ct) == 0 {
			return b, fmt.Errorf("the child made no call")
		}
		b.childLast = contextTokens(ct[len(ct)-1])
		r, err := v.receipt(child)
		if err != nil {
			return b, err
		}
		if r.Evicted != nil {
			b.evicted, b.pointer = r.Evicted, r.Tokens
			for _, c := range turns {
				for _, m := range v.context(c) {
					if m.ID == r.ID {
						b.laterCalls++
					}
				}
			}
		}
	}
	for _, m := range v.list(reader) {
		if m.Role == string(delegation.RoleTool) {
			b.readChars = chars(m.Content)
			b.readCut = strings.HasPrefix(m.Content, "[Output was truncated due to size limits.")
			b.readOn = strings.Contains(m.Content, "read on with offset")
			break
		}
	}
	return b, nil
}

func bigReadsTable(r runs) (Table, error) {
	got := map[string]bigRead{}
	for _, name := range []string{"alone", "delegated", "everything-back"} {
		b, err := readBig(r.view(name))
		if err != nil {
			return Table{}, fmt.Errorf("variant %s: %w", name, err)
		}
		got[name] = b
	}
	a, d, e := got["alone"], got["delegated"], got["everything-back"]
	dash := func(n int, ok bool) string {
		if !ok {
			return "–"
		}
		return itoa(n)
	}
	evictedTokens := 0
	if e.evicted != nil {
		evictedTokens = e.evicted.Tokens
	}
	tab := Table{
		Title: "One long log, read three ways",
		Columns: []string{"run", "the parent's last context (tokens)", "the child's last context (tokens)",
			"the first read, as the model got it (characters)", "moved to a file (tokens)", "its pointer (tokens)"},
		Rows: [][]string{
			{"read by the main agent", itoa(a.parentLast), "–", itoa(a.readChars), "–", "–"},
			{"read by a child, one sentence back", itoa(d.parentLast), itoa(d.childLast), itoa(d.readChars), "–", "–"},
			{"read by a child, all of it back", itoa(e.parentLast), itoa(e.childLast), itoa(e.readChars),
				dash(evictedTokens, e.evicted != nil), dash(e.pointer, e.evicted != nil)},
		},
	}
	tab.Note = fmt.Sprintf("Our read_file numbers its lines, so the cut read is %d characters where deepagents' is a little shorter; "+
		"the cut falls on the same line. The receipt of %d tokens became a pointer of %d in the parent's context.",
		a.readChars, evictedTokens, e.pointer)
	path := ""
	if e.evicted != nil {
		path = e.evicted.Path
	}
	tab.Versus = []Versus{
		{What: "the child's reading", Article: "stays in the child: only the receipt comes back (Article 1, §4)",
			Ours: fmt.Sprintf("the parent ends at %d tokens, against %d when it reads the log itself", d.parentLast, a.parentLast),
			Why:  "the child's messages never enter the parent's context"},
		{What: "a big read", Article: "deepagents' read_file stops at 80,000 characters (20,000 tokens × 4), under a notice",
			Ours: fmt.Sprintf("%d characters, line numbers included", a.readChars),
			Why:  "deepagents' read_file limit, with its notice, cut on the same line as deepagents cuts it"},
		{What: "a receipt too big for the parent", Article: "deepagents writes a result over 20,000 tokens to /large_tool_results/ and hands over a pointer",
			Ours: fmt.Sprintf("%d tokens went to %s; the parent's %d later calls read a pointer of %d", evictedTokens, path, e.laterCalls, e.pointer),
			Why:  "deepagents' FilesystemMiddleware evicts a big tool result, and our engine does as it does"},
	}
	tab.Checks = append(tab.Checks,
		check("read_file cuts the long log under deepagents' truncation notice and says where to read on",
			a.readCut && a.readOn && d.readCut && a.readChars <= delegation.ReadFileMaxChars+1000,
			"%d characters shown (deepagents' limit: %d, our line numbers besides)", a.readChars, delegation.ReadFileMaxChars),
		check("the big read stays in the child: delegated, the parent ends at a tenth of the context it has reading the log itself, or less",
			10*d.parentLast <= a.parentLast, "%d tokens delegated, %d alone", d.parentLast, a.parentLast),
		check("a receipt over deepagents' limit goes to a file under /large_tool_results/, and the parent reads a pointer",
			e.evicted != nil && strings.HasPrefix(path, delegation.LargeToolResultsDir) && e.evicted.Chars > delegation.ToolResultEvictChars,
			"%s", evictedDetail(e.evicted)),
		check("the pointer is a tenth of the receipt or less, in each of the parent's later calls",
			e.evicted != nil && 10*e.pointer <= evictedTokens && e.laterCalls > 0,
			"%d tokens against %d, in %d calls", e.pointer, evictedTokens, e.laterCalls),
	)
	return tab, nil
}

func evictedDetail(e *delegation.Eviction) string {
	if e == nil {
		return "the receipt was not evicted"
	}
	return fmt.Sprintf("%d characters, %d tokens, to %s", e.Chars, e.Tokens, e.Path)
}
