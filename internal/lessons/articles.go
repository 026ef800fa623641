package lessons

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// Article is one of the three articles the lessons come from, named as a
// reader would look for it: its title, in English and as published (in
// Chinese), and its numbered sections, in English and as published.
type Article struct {
	Number           int
	Title, Original  string
	Sections         []string // section n is Sections[n-1]
	OriginalSections []string // as the article heads them, without their numeral
}

// Articles are the three articles, in the order the lessons number them.
var Articles = []Article{
	{Number: 1, Title: "How the task tool hands work to a subagent", Original: "task 工具怎么把活派给子 Agent",
		Sections: []string{"The tool's face", "What the child has once the work is sent", "What the parent gets on the way back",
			"Where the middle part goes", "A subagent cannot delegate further", "What build and call time stop", "So when to delegate"},
		OriginalSections: []string{"先看这个工具的脸", "派出去之后，子 Agent 手上有什么", "回来的路上，父拿到什么", "中间那一段去哪了",
			"子 Agent 不能再往下派", "装配期和调用期会拦下什么", "所以什么时候该派"}},
	{Number: 2, Title: "Isolated or fork?", Original: "委派用 isolated 还是 fork",
		Sections: []string{"One more line on the list", "The first look: an order of magnitude apart", "Prompts are joined, not replaced",
			"The entry fee: the more the parent did, the more a fork reads", "How detailed a task should be",
			"What is kept out, put in, summarized away", "How to choose"},
		OriginalSections: []string{"装配的时候，清单上就多一行尾巴", "开局那一眼，两边差一个数量级", "提示词是拼出来的，不是替换",
			"入场费：父干得越多，fork 读得越多", "任务描述该写多细", "挡什么、塞什么、压缩掉什么", "怎么选"}},
	{Number: 3, Title: "Subagents: context isolation and three patterns", Original: "子 Agent：上下文隔离与三种编排模式",
		Sections: []string{"Why subagents: context isolation", "Three patterns: pipeline, fan-out, review loop",
			"Writing it: spawning a subagent on the harness", "When not to use several agents"},
		OriginalSections: []string{"为什么需要子 Agent：上下文隔离", "三种编排模式", "手写：在基座上实现子 Agent 派生", "什么时候不要用多 Agent"}},
}

// Cite is a lesson's source as a person reads it: an article by its title
// and the sections it draws on, or the studio's own rules.
type Cite struct {
	Article  *Article // nil for the studio's own
	Own      string   // what of the studio's own, when Article is nil
	Sections []Section
}

// Section is a numbered section with its title, in English and as the
// article heads it.
type Section struct {
	Number          int
	Title, Original string
}

var (
	articleRef = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`Article (\d)(?: \([^)]*\))?((?:,? ?(?:and )?§\d+(?:[–-]§\d+)?)*)`)
	})
	sectionRef = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`§(\d+)(?:[–-]§(\d+))?`) })
)

// Cites reads a lesson's Article line ("Article 2 (isolated or fork), §2
// and §5; Article 3 …", "Ours: …") as the articles and sections it names.
func Cites(line string) []Cite {
	var out []Cite
	for _, m := range articleRef().FindAllStringSubmatch(line, -1) {
		n, _ := strconv.Atoi(m[1])
		if n < 1 || n > len(Articles) {
			continue
		}
		a := &Articles[n-1]
		c := Cite{Article: a}
		for _, s := range sectionRef().FindAllStringSubmatch(m[2], -1) {
			from, _ := strconv.Atoi(s[1])
			to := from
			if s[2] != "" {
				to, _ = strconv.Atoi(s[2])
			}
			for k := from; k <= to && k >= 1 && k <= len(a.Sections); k++ {
				c.Sections = append(c.Sections, Section{Number: k, Title: a.Sections[k-1], Original: a.OriginalSections[k-1]})
			}
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		if own, ok := strings.CutPrefix(line, "Ours: "); ok {
			out = append(out, Cite{Own: own})
		}
	}
	return out
}

// Summary is a lesson's description without the citation it opens with
// ("Article 2 (isolated or fork), §4: …"), which Cites names better.
func (l Lesson) Summary() string {
	d := l.Description
	if i := strings.Index(d, ": "); i > 0 && (strings.HasPrefix(d, "Article ") || strings.HasPrefix(d, "Ours")) && i < 120 {
		rest := d[i+2:]
		if rest != "" {
			return strings.ToUpper(rest[:1]) + rest[1:]
		}
	}
	return d
}

// course is the order a newcomer takes the lessons in: one delegation
// first, then what crosses, then the two modes, then the patterns.
var course = []string{
	"one-delegation", "parent-after", "order-number", "receipt", "files-and-todos", "nested-delegation",
	"tool-stack", "task-description", "system-prompt", "entry-cost", "what-a-child-inherits", "summarized-fork",
	"isolated-or-fork", "cache-and-cost", "structured-fork", "config-errors", "read-only-explorer", "fan-out", "pipeline",
	"review-loop", "failure-isolation", "when-to-delegate", "big-reads", "lost-update", "received-deepagents",
	"article-loop",
}

// Course returns every lesson in the order a newcomer takes them; the
// first is where to start. Lessons the order does not name come last, by
// name.
func Course() []Lesson {
	all := All()
	rank := map[string]int{}
	for i, n := range course {
		rank[n] = i + 1
	}
	out := make([]Lesson, 0, len(all))
	for _, n := range course {
		for _, l := range all {
			if l.Name == n {
				out = append(out, l)
			}
		}
	}
	for _, l := range all {
		if rank[l.Name] == 0 {
			out = append(out, l)
		}
	}
	return out
}
