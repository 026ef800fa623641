// Package lessons holds the built-in lessons: every experiment of the three
// articles the studio comes from (how a deepagents-style agent delegates
// to subagents), made runnable. A lesson is one or more scenario variants,
// run together, and the table they reproduce — computed from the variants'
// traces, never typed in. Where the article's own figures are comparable
// they are shown beside ours, labelled as the article's.
//
// The scenarios are files in scenarios/ (one per variant: <lesson>.json, or
// <lesson>--<variant>.json); each lesson's metadata and how its table is
// computed live in a Go file of their own, listed in registry below.
package lessons

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/trace"
)

//go:embed scenarios/*.json recorded/*.json
var files embed.FS

// Lesson is a built-in experiment: one or more scenario variants run
// together, and the table they reproduce.
type Lesson struct {
	Name, Title string
	// Description is a short explanation in English: it names the article
	// and section it reproduces, and what to look at.
	Description string
	Article     string // e.g. "Article 2 (isolated or fork), §4"
	Scenario    []byte // the first variant's scenario (kept for existing callers)
	Variants    []Variant
	// Cites are the articles and sections it reproduces, by title.
	Cites []Cite
	// BothModes says that running its scenario with every subagent
	// isolated, then every one a fork, teaches something; for the rest
	// (validation, merges, a recorded trace, lessons that already set both
	// modes side by side) the modes are beside the point.
	BothModes bool
	// Notes are the notes ("Worth a look", internal/view) each variant's
	// session is expected to show, by kind, in the order found: often
	// none. A test fails on any other.
	Notes map[string][]string

	table  func(runs) (Table, error)
	claims []claim
}

// claim ties a figure a lesson's text states to the cell of its computed
// table that must hold it: phrase is a piece of the lesson's description, a
// scenario's description or the table's note, with one number in it (in
// digits, or a word from two to twenty); the cell is the row whose first
// cell is row, in the column named col. A test checks every claim, and that
// every other figure in those texts is a section number, an input of the
// scenario, or one of the article's own figures.
type claim struct{ phrase, row, col string }

// Variant is one scenario of a lesson. Name is unique in the lesson (a
// lesson with one variant names it after itself). A variant may instead be
// a recording of someone else's program (Recorded set, Scenario nil): an
// OTLP trace, which running it maps as the studio maps received spans, or
// the studio's own trace of a session its recording endpoint recorded.
type Variant struct {
	Name, Label string
	Scenario    []byte
	// Expect is the status the run ends with: done, or failed for a variant
	// that shows deepagents failing where we do not (compat "deepagents").
	Expect string
	// Recorded is a recorded trace (OTLP, or the studio's trace JSON), for
	// a variant that maps one.
	Recorded []byte
}

// Table is what a lesson reproduces, computed from its runs, never typed in.
type Table struct {
	Title   string
	Columns []string
	Rows    [][]string
	// Article is the article's own figures for the same table where they are
	// comparable (typed in from the article, clearly labelled as the
	// article's); nil when not comparable.
	Article *ArticleTable
	// Note is one sentence on any difference: our prompt texts are our own,
	// so absolute sizes differ; structure and direction must match.
	Note string
	// Checks are the structural facts the run must show, each computed.
	Checks []Check
	// Versus sets the article's figures and ours side by side, row by
	// row, each with why they differ or agree.
	Versus []Versus
	// Chart, when set, draws some of the table's figures as bars.
	Chart *BarChart
	// Lines, when set, draws some of the table's figures as one line per
	// mode against the parent's steps: the entry cost lesson's.
	Lines *LineChart
}

// LineChart is a figure of each mode against the steps the parent took
// first, from the numbers the table's cells are written from.
type LineChart struct {
	Series []LineSeries
}

// LineSeries is one mode's line: a point per row of the table.
type LineSeries struct {
	Mode   delegation.Mode
	Points []LinePoint
}

// LinePoint is one row's figure: X the parent's steps, Y the tokens.
type LinePoint struct{ X, Y int }

// BarChart is figures of a table drawn as bars: one group per measure, one
// bar per row, each bar stacked from its parts.
type BarChart struct {
	Title  string
	Groups []BarGroup
}

// BarGroup is one measure: its title, its unit ("tokens" or "dollars").
type BarGroup struct {
	Title, Unit string
	Bars        []Bar
}

// Bar is one row's figure, in parts.
type Bar struct {
	Label string
	Parts []BarPart
}

// BarPart is one part of a bar.
type BarPart struct {
	Name  string
	Value float64
}

// Versus is one figure of the article beside ours.
type Versus struct {
	What, Article, Ours, Why string
	// Counted, for a figure that depends on deepagents' texts, is ours
	// counted as the article counted it; nil for the others.
	Counted *Counted
}

// Counted is one of our figures counted as the article counted it —
// tokens with LangChain's count_tokens_approximately (articleTokens),
// characters as code points — beside the article's figure. Within 15 % of
// it, the convention explains the gap between Ours and Article; further
// off, Gap says what else differs (our texts, what the article does not
// print). A lesson test holds both ways: no gap without its reason, no
// reason left where there is no gap.
type Counted struct {
	Ours, Article int
	Gap           string
}

// Diff is the counted figure's difference from the article's, in per cent
// ("+8.3%").
func (c Counted) Diff() string { return pctDiff(c.Ours, c.Article) }

// Off says whether the counted figure is more than 15 % from the article's.
func (c Counted) Off() bool { return !withinPct(c.Ours, c.Article, 15) }

// countedFigure is one of ours counted as the article counts, for the Versus
// named what: against the article's figure, with the reason they still
// differ ("" where they do not).
type countedFigure struct {
	what          string
	ours, article int
	gap           string
}

// countAs sets the counted figures of the Versus they name. A name no
// Versus has is an error, so a renamed row cannot drop its figure unseen.
func (tab *Table) countAs(figs ...countedFigure) error {
next:
	for _, f := range figs {
		for i := range tab.Versus {
			if tab.Versus[i].What == f.what {
				tab.Versus[i].Counted = &Counted{Ours: f.ours, Article: f.article, Gap: f.gap}
				continue next
			}
		}
		return fmt.Errorf("lesson table %q: no figure %q to count as the article counts", tab.Title, f.what)
	}
	return nil
}

// ArticleTable is the article's own figures, typed in from it.
type ArticleTable struct {
	Columns []string
	Rows    [][]string
}

// Check is one structural fact a lesson's runs must show, with what was
// measured.
type Check struct {
	Claim  string
	OK     bool
	Detail string
}

// lessonDef is how a lesson is described in its Go file: its metadata, its
// variants (nil: one, named after the lesson), and how its table is computed.
type lessonDef struct {
	name, title, article, description string
	variants                          []variantDef
	table                             func(runs) (Table, error)
	claims                            []claim
	// bothModes: see Lesson.BothModes; notes: Lesson.Notes.
	bothModes bool
	notes     map[string][]string
	// recorded maps a variant to a recording in recorded/ (an OTLP trace,
	// or the studio's trace JSON), which it maps instead of running a
	// scenario.
	recorded map[string]string
}

type variantDef struct{ name, label, expect string }

// registry lists every lesson; All sorts them by name.
var registry = []lessonDef{
	toolStack,
	taskDescription,
	oneDelegation,
	parentAfter,
	receipt,
	receivedDeepagents,
	filesAndTodos,
	nestedDelegation,
	configErrors,
	orderNumber,
	systemPrompt,
	entryCost,
	cacheAndCost,
	summarizedFork,
	pipeline,
	fanOut,
	reviewLoop,
	readOnlyExplorer,
	failureIsolation,
	lostUpdate,
	whenToDelegate,
	whatAChildInherits,
	isolatedOrFork,
	structuredFork,
	bigReads,
	articleLoop,
}

var (
	loadOnce sync.Once
	loaded   []Lesson
)

// All returns every lesson, in name order.
func All() []Lesson {
	loadOnce.Do(func() { loaded = load() })
	return append([]Lesson(nil), loaded...)
}

// load reads each lesson's scenario files. A missing or unreadable file is a
// bug in this package, caught by its tests.
func load() []Lesson {
	out := make([]Lesson, 0, len(registry))
	for _, d := range registry {
		l := Lesson{Name: d.name, Title: d.title, Description: d.description, Article: d.article, table: d.table, claims: d.claims,
			Cites: Cites(d.article), BothModes: d.bothModes, Notes: d.notes}
		vs := d.variants
		if len(vs) == 0 {
			vs = []variantDef{{name: d.name, label: d.title}}
		}
		for _, v := range vs {
			if file := d.recorded[v.name]; file != "" {
				doc, err := files.ReadFile(path.Join("recorded", file))
				if err != nil {
					panic(fmt.Sprintf("lesson %s: %v", d.name, err))
				}
				l.Variants = append(l.Variants, Variant{Name: v.name, Label: v.label, Recorded: doc, Expect: delegation.StatusDone})
				continue
			}
			doc, err := files.ReadFile(path.Join("scenarios", fileName(d.name, v.name)))
			if err != nil {
				panic(fmt.Sprintf("lesson %s: %v", d.name, err))
			}
			expect := v.expect
			if expect == "" {
				expect = delegation.StatusDone
			}
			l.Variants = append(l.Variants, Variant{Name: v.name, Label: v.label, Scenario: doc, Expect: expect})
		}
		l.Scenario = l.Variants[0].Scenario
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// fileName is a variant's scenario file: <lesson>.json for the variant named
// after its lesson, <lesson>--<variant>.json otherwise.
func fileName(lesson, variant string) string {
	if variant == lesson {
		return lesson + ".json"
	}
	return lesson + "--" + variant + ".json"
}

// Get returns the named lesson.
func Get(name string) (Lesson, error) {
	var names []string
	for _, l := range All() {
		if l.Name == name {
			return l, nil
		}
		names = append(names, l.Name)
	}
	return Lesson{}, fmt.Errorf("no lesson %q; the lessons are %s", name, strings.Join(names, ", "))
}

// Variant returns the named variant.
func (l Lesson) Variant(name string) (Variant, bool) {
	for _, v := range l.Variants {
		if v.Name == name {
			return v, true
		}
	}
	return Variant{}, false
}

// Table computes the lesson's table from its runs: the trace of each
// variant, by variant name.
func (l Lesson) Table(runs map[string]*trace.Trace) (Table, error) {
	if l.table == nil {
		got, err := Get(l.Name)
		if err != nil {
			return Table{}, err
		}
		l = got
	}
	for _, v := range l.Variants {
		if runs[v.Name] == nil {
			return Table{}, fmt.Errorf("lesson %s: no run of variant %q", l.Name, v.Name)
		}
	}
	t, err := l.table(runs)
	if err != nil {
		return Table{}, fmt.Errorf("lesson %s: %w", l.Name, err)
	}
	return t, nil
}

// Run runs the variant's scenario to its end and returns its trace. The
// error is set when the scenario is invalid or the session did not end as
// the variant expects (the trace, when there is one, is returned all the
// same).
func (v Variant) Run(ctx context.Context) (*trace.Trace, error) {
	if v.Recorded != nil {
		t, err := recordedTrace(v.Recorded)
		if err != nil {
			return nil, fmt.Errorf("variant %s: %w", v.Name, err)
		}
		return t, nil
	}
	sc, err := scenario.Parse(v.Scenario)
	if err != nil {
		return nil, fmt.Errorf("variant %s: %w", v.Name, err)
	}
	var (
		mu     sync.Mutex
		events []delegation.Event
	)
	sink := delegation.SinkFunc(func(e delegation.Event) {
		if e.Seq > 0 {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}
	})
	id := session.NewID()
	res, err := session.Run(ctx, sc, session.RunOptions{SessionID: id, Sink: sink})
	if err != nil {
		return nil, fmt.Errorf("variant %s: %w", v.Name, err)
	}
	t, err := trace.Build(trace.Meta{ID: id, Title: sc.File.Title, Scenario: sc.Raw}, events)
	if err != nil {
		return nil, fmt.Errorf("variant %s: build the trace: %w", v.Name, err)
	}
	want := v.Expect
	if want == "" {
		want = delegation.StatusDone
	}
	if res.Status != want {
		return t, fmt.Errorf("variant %s: the session ended %s, not %s: %v", v.Name, res.Status, want, res.Err)
	}
	return t, nil
}

// recordedTrace maps a recording: the studio's own trace JSON (a session
// of its recording endpoint) as it is, an OTLP file's first trace as the
// receiver maps spans.
func recordedTrace(raw []byte) (*trace.Trace, error) {
	format := session.DetectFormat(raw)
	if format == session.FormatTrace {
		t, _, err := trace.Parse(raw)
		return t, err
	}
	ts, err := session.OTLPTraces(raw, format)
	if err != nil {
		return nil, err
	}
	return ts[0], nil
}

// Run runs every variant of the lesson at once and returns their traces by
// variant name.
func (l Lesson) Run(ctx context.Context) (map[string]*trace.Trace, error) {
	out := make(map[string]*trace.Trace, len(l.Variants))
	errs := make([]error, len(l.Variants))
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for i, v := range l.Variants {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t, err := v.Run(ctx)
			errs[i] = err
			if t != nil {
				mu.Lock()
				out[v.Name] = t
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// runs are a lesson's traces by variant name.
type runs map[string]*trace.Trace

// view returns the named variant's trace, prepared for reading.
func (r runs) view(name string) *view { return newView(r[name]) }

// scenarioOf reads back the scenario a trace ran.
func scenarioOf(t *trace.Trace) (*scenario.Scenario, error) {
	return scenario.Parse(t.Scenario)
}

// compactJSON is v as compact JSON, for table cells.
func compactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
