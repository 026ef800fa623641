package lessons

import (
	"fmt"
	"slices"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/tokens"
	"github.com/delegationstudio/studio/internal/trace"
)

var orderNumber = lessonDef{
	name:    "order-number",
	title:   "Isolated vs fork: who can see the order number?",
	article: "Article 2 (isolated or fork), §2 and §5",
	description: "Article 2 (isolated or fork), §2 and §5: the same one-line task, 'Report the order number above', " +
		"sent in one message to an isolated reporter and to a fork reporter. Look at the children's first calls: " +
		"two messages and no A-7731 against nine messages with it, while the task calls cost the parent " +
		"exactly the same.",
	notes: map[string][]string{"order-number": {"context_missing", "unused_receipt"}},
	table: orderNumberTable,
	claims: []claim{
		{"two messages", "opening messages (system prompt + context)", "isolated"},
		{"nine messages", "opening messages (system prompt + context)", "fork"},
	},
}

// callTokens is what one tool call costs in its message, counted the way the
// engine counts a message (delegation.MessageTokens), with the session's
// tokenizer.
func callTokens(t *trace.Trace, c trace.ToolCall) (int, error) {
	counter, err := tokens.Get(t.Session.Tokenizer)
	if err != nil {
		return 0, err
	}
	return delegation.MessageTokens(counter, &delegation.Message{ToolCalls: []delegation.ToolCall{c}}), nil
}

// orderArticleTask is the article's own task, «把刚才那个订单号报给我»
// (article 2, §2); ours says it in English.
const orderArticleTask = "把刚才那个订单号报给我"

func orderNumberTable(r runs) (Table, error) {
	const order = "A-7731"
	v := r.view("order-number")
	iso, err := readOrderSide(v, "iso-reporter", order)
	if err != nil {
		return Table{}, err
	}
	fork, err := readOrderSide(v, "fork-reporter", order)
	if err != nil {
		return Table{}, err
	}
	tab := Table{
		Title:   "The reporters' first model calls, isolated and fork",
		Columns: []string{"", "isolated", "fork"},
		Rows: [][]string{
			{"opening messages (system prompt + context)", itoa(iso.msgs), itoa(fork.msgs)},
			{"opening tokens (system prompt + messages)", itoa(iso.tokens), itoa(fork.tokens)},
			{"of which inherited from the parent", itoa(iso.inherited), itoa(fork.inherited)},
			{"what it holds", "its prompt + the task", "the parent's whole conversation + the task"},
			{"tool definitions", fmt.Sprintf("%d tools, %d tokens", iso.toolsN, iso.toolTok), fmt.Sprintf("%d tools, %d tokens", fork.toolsN, fork.toolTok)},
			{order + " in its first call's context", itoa(iso.n), itoa(fork.n)},
			{"its receipt", iso.d.receipt.Content, fork.d.receipt.Content},
			{"the parent's task call (tokens)", itoa(iso.callTok), itoa(fork.callTok)},
		},
	}
	tab.Article = &ArticleTable{
		Columns: tab.Columns,
		Rows: [][]string{
			{"opening messages (system prompt + context)", "2", "9"},
			{"opening tokens (system prompt + messages)", "12", "326"},
			{"what it holds", "prompt + task description", "the parent's whole conversation + task description"},
			{order + " in its first call's context", "0", "1"},
			{"the parent's task call (tokens)", "36", "36"},
		},
	}
	tab.Note = fmt.Sprintf("The messages match the article's; the tokens are our texts' and our parent's own steps (the fork opens with %d tokens "+
		"against 326, the isolated child with %d against 12, our empty prompt and a task of our own), in the same direction and of the same order.",
		fork.tokens, iso.tokens)
	tab.Versus = versusArticle(tab, "isolated", "isolated", "")
	for _, x := range versusArticle(tab, "fork", "fork", "") {
		x.What += " (fork)"
		tab.Versus = append(tab.Versus, x)
	}
	for i := range tab.Versus {
		tab.Versus[i].Why = "the same shape: the fork reads the parent's whole conversation; token counts are our tokenizer's, over our texts"
	}
	if err := countOrderNumber(&tab, iso.counted, fork.counted, iso.d.call, fork.d.call, iso.d.task); err != nil {
		return Table{}, err
	}

	tab.Checks = append(tab.Checks,
		check("the isolated reporter starts from 2 messages: its system prompt and the task", iso.msgs == 2,
			"%d messages", iso.msgs),
		check("the fork reporter starts from the parent's whole conversation before the call, then the task",
			fork.whole, "%d messages (system prompt + %d of the parent's + the task)", fork.msgs, fork.msgs-2),
		check("the fork's opening costs many times the isolated one's", fork.tokens > 5*iso.tokens,
			"%d against %d tokens", fork.tokens, iso.tokens),
		check(order+" appears 0 times in the isolated reporter's context and once in the fork's", iso.n == 0 && fork.n == 1,
			"isolated %d, fork %d", iso.n, fork.n),
		check("only the fork can answer", !strings.Contains(iso.d.receipt.Content, order) && strings.Contains(fork.d.receipt.Content, order),
			"isolated: %q; fork: %q", iso.d.receipt.Content, fork.d.receipt.Content),
		check("the two task calls cost the parent the same", iso.callTok == fork.callTok && iso.d.task == fork.d.task,
			"%d and %d tokens, the same description", iso.callTok, fork.callTok),
		check("the fork opens with nine messages, as in the article: the parent did three steps first", fork.msgs == 9,
			"%d messages", fork.msgs),
		check("the isolated child has 7 tools without task; the fork the parent's 8",
			iso.toolsN == 7 && fork.toolsN == 8 && hasToolNamed(fork.d.child.Tools, delegation.TaskToolName), "%d and %d", iso.toolsN, fork.toolsN),
	)
	return tab, nil
}

// orderSide is what the lesson reads of one reporter's first call.
type orderSide struct {
	d                                  *delegationRun
	msgs, tokens, inherited, n, toolsN int
	toolTok, callTok                   int
	whole                              bool // the fork's context: the parent's list up to the call, then the task
	counted                            int  // its opening, counted as the article counts
}

// readOrderSide reads a reporter's first call.
func readOrderSide(v *view, name, order string) (orderSide, error) {
	d, err := oneChild(v, name)
	if err != nil {
		return orderSide{}, err
	}
	c, err := v.firstCall(d.child.ID)
	if err != nil {
		return orderSide{}, err
	}
	ct, err := callTokens(v.t, d.call)
	if err != nil {
		return orderSide{}, err
	}
	ctx := v.context(c)
	var before []string
	for _, m := range v.list(d.main.ID) {
		if m.ID == d.callMsg.ID {
			break
		}
		before = append(before, m.ID)
	}
	var got []string
	for _, m := range ctx[:max(len(ctx)-1, 0)] {
		got = append(got, m.ID)
	}
	whole := len(ctx) > 0 && slices.Equal(got, before) && strings.HasSuffix(ctx[len(ctx)-1].Content, d.task) &&
		ctx[len(ctx)-1].Kind == string(delegation.KindForkPreamble)
	return orderSide{d: d, msgs: v.messageCount(c), tokens: contextTokens(c), inherited: c.InheritedTokens,
		n: v.occurrences(c, order), toolsN: len(c.Tools), toolTok: c.ToolTokens, callTok: ct, whole: whole,
		counted: v.articleTokens(c)}, nil
}

// countOrderNumber counts the table's figures as the article counts: the
// fork's opening is deepagents' texts and the parent's steps, and lands on
// the article's figure; the isolated child and the call carry our task, in
// English, where the article's is 11 Chinese characters — the same count
// over its task gives its figures.
func countOrderNumber(tab *Table, isoOpen, forkOpen int, isoCall, forkCall trace.ToolCall, task string) error {
	withTask, err := withDescription(isoCall, orderArticleTask)
	if err != nil {
		return err
	}
	taskGap := fmt.Sprintf("our task %q is %d characters, the article's %q %d; counted the same way, ", task, chars(task),
		orderArticleTask, chars(orderArticleTask))
	callGap := taskGap + fmt.Sprintf("the call with its task makes %d", articleCallTokens(withTask))
	return tab.countAs(
		countedFigure{"opening tokens (system prompt + messages)", isoOpen, 12, taskGap + fmt.Sprintf("its task and an empty prompt make %d", articleTaskTokens())},
		countedFigure{"opening tokens (system prompt + messages) (fork)", forkOpen, 326, ""},
		countedFigure{"the parent's task call (tokens)", articleCallTokens(isoCall), 36, callGap},
		countedFigure{"the parent's task call (tokens) (fork)", articleCallTokens(forkCall), 36, callGap},
	)
}

// articleTaskTokens is the article's own task, «把刚才那个订单号报给我», with
// an empty prompt, counted as the article counts: its 12 (article 2, §2, §4).
func articleTaskTokens() int {
	return tokens.CountLangChain(tokens.LangChainMessage{Role: "system"}, tokens.LangChainMessage{Role: "user", Content: orderArticleTask})
}
