package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/i18n"
	"github.com/delegationstudio/studio/internal/lessons"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/trace"
	"github.com/delegationstudio/studio/internal/view"
)

const runAbout = `Runs a scenario file, or a built-in lesson (see 'studio lessons'), headless, and
prints its delegation tree, or its trace with --json. The scripted model plays the
scenario's script unless --model-url, --model or --api-key-env is given: then the
script is set aside and the scenario runs against a model, OpenAI-compatible
unless the file says "provider": "anthropic". Those flags and --no-stream win
over the fields of the file each names below; the file is checked after them.

While it runs, progress goes to stderr when stderr is a terminal: agents starting
and finishing, model calls, retries; --verbose adds the text the model streams and
shows progress on any stderr. Ctrl-C stops the session: it ends as interrupted,
the tree so far is printed, and the exit code is 130.

With --db the process holds its session with a lease it renews (30 s). If the
process is suspended or starved past it, another process (a studio serve,
'studio sessions') ends the session as interrupted; the run then stops, says so,
prints the tree as stored and exits 3.

Exit codes: 0 done, 1 the session failed, 2 bad scenario or settings, 3 the
lease lapsed and another process took the session over, 130 stopped.`

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("run", "studio run SCENARIO.json|lesson:NAME[--VARIANT] [flags]", runAbout, stdout, stderr).
		positional(1, "a scenario file, or lesson:NAME (see 'studio lessons')")
	asJSON := c.Bool("json", "print the session's trace as JSON instead of the tree", nil)
	// formats.md §4: run keeps nothing unless --db is given, so no
	// variable turns storing on behind a script's back.
	dbPath := c.String("db", "", "", "store the session in this database: a SQLite `file` or a postgres:// URL; its id is the trace's session.id (without it nothing is kept)", []string{})
	mf := defineModelFlags(c)
	var endpoints endpointFlags
	c.fs.Var(&endpoints, "endpoint", "an endpoint the scenario may name (\"endpoint\": NAME): `NAME=[PROVIDER:]URL[,KEY_ENV[,MODEL]]` (PROVIDER openai, the default, or anthropic); repeatable")
	c.add("endpoint", "", []string{})
	mf.noStream = c.Bool("no-stream", "wait for each whole answer instead of streaming it, over every agent's stream in the file (for servers that cannot stream tool calls)", nil)
	verbose := c.Bool("verbose", "show progress on any stderr, with the text models stream as it arrives", nil)
	quiet := c.Bool("quiet", "show no progress, even on a terminal", nil)
	// --lease is left out of the help, for the tests: how long this
	// process's hold on its stored session lasts unrenewed (0: 30 s), so
	// that a test sees it lapse in moments (README, "Running a scenario").
	lease := c.fs.Duration("lease", 0, "")
	pos, code, ok := c.parse(args)
	if !ok {
		return code
	}
	if err := checkEndpoints(endpoints); err != nil {
		return c.fail("%v", err)
	}
	if err := session.CheckKeyEnv(*mf.keyEnv); err != nil {
		return c.fail("--api-key-env: %v", err)
	}
	sc, code := loadScenario(pos[0], mf.flags(), mf.flagFor, stderr)
	if sc == nil {
		return code
	}
	printWarnings(stderr, sc.Warnings)
	// The model is made before anything runs or is stored, so a missing
	// key or a bad URL fails here, at once. Its warnings about retries are
	// the progress lines' to tell; errors still reach stderr.
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	model, err := session.ModelWith(sc, session.Endpoints{List: endpoints}, log)
	if err != nil {
		printErrors(stderr, pos[0], err, mf.flagFor)
		return exitUsage
	}

	prog := newProgress(stderr, *verbose, !*quiet && (*verbose || isTerminal(stderr)))
	var out runOutput
	var res *delegation.Result
	leaseLost := false // another process ended the session: its lease lapsed
	if *dbPath != "" {
		d, ok := openStore(ctx, *dbPath, stderr)
		if !ok {
			return exitFailed
		}
		defer d.Close()
		r := &session.Runner{DB: d, Pub: prog, Logger: log, Lease: *lease,
			ModelFor: func(*scenario.Scenario) (delegation.Model, error) { return model, nil }}
		var id string
		if id, res, err = r.Run(ctx, sc); err != nil && res == nil {
			fmt.Fprintf(stderr, "studio run: %v\n", err)
			return exitFailed
		} else if errors.Is(err, session.ErrLeaseLost) {
			leaseLost = true
		} else if err != nil {
			fmt.Fprintf(stderr, "studio run: %v\n", err)
		}
		prog.Close()
		// Reading the session back must not stop with the run: after
		// Ctrl-C the tree so far is still printed.
		if code := printStored(context.WithoutCancel(ctx), d, id, *asJSON, stdout, stderr); code != exitOK {
			return code
		}
		return runExit(res, leaseLost, stderr)
	}
	id := session.NewID()
	out.start(trace.Meta{ID: id, Title: sc.File.Title, Scenario: sc.Raw}, !*asJSON)
	sink := delegation.SinkFunc(func(e delegation.Event) {
		out.add(e)
		prog.event(e)
	})
	if res, err = session.Run(ctx, sc, session.RunOptions{SessionID: id, Sink: sink, Model: model, Logger: log}); err != nil {
		fmt.Fprintf(stderr, "studio run: %v\n", err)
		return exitUsage
	}
	prog.Close()
	if out.err != nil {
		fmt.Fprintf(stderr, "studio run: build the trace: %v\n", out.err)
		return exitFailed
	}
	if *asJSON {
		if code := writeTrace(stdout, stderr, trace.SourceOf(out.b.Trace())); code != exitOK {
			return code
		}
	} else {
		printState(stdout, out.b.Trace(), out.st)
	}
	return runExit(res, leaseLost, stderr)
}

// runOutput is what a run without a store keeps of its log, one event at
// a time as the engine emits it: the trace (for --json), and for the tree
// the page state, folded from the same reading of each event (trace.Step)
// by the session page's fold (view.State.ApplyStep), with no JSON between.
type runOutput struct {
	b   *trace.Builder
	st  *view.State // nil with --json
	err error       // the first event that could not be read
}

func (o *runOutput) start(meta trace.Meta, tree bool) {
	o.b = trace.NewBuilder(meta)
	if tree {
		o.st = view.New(view.Meta{ID: meta.ID, Title: meta.Title})
	}
}

// add folds in the engine's next event; live-only ones (seq 0) are not
// kept.
func (o *runOutput) add(e delegation.Event) {
	if e.Seq <= 0 || o.err != nil {
		return
	}
	step, err := o.b.Add(e)
	if err == nil && o.st != nil {
		var ch view.Changes // nobody watches: what changed is dropped
		err = o.st.ApplyStep(step, &ch)
	}
	o.err = err
}

// printStored prints a stored session: its trace streamed from the store
// (as `studio export` does), or its tree.
func printStored(ctx context.Context, d store, id string, asJSON bool, stdout, stderr io.Writer) int {
	if asJSON {
		code := exitOK
		err := d.Read(ctx, id, func(r db.Reader) error {
			code = writeTrace(stdout, stderr, r)
			return nil
		})
		if err != nil {
			fmt.Fprintf(stderr, "studio run: %v\n", err)
			return exitFailed
		}
		return code
	}
	t, err := d.Trace(ctx, id)
	if err != nil {
		fmt.Fprintf(stderr, "studio run: %v\n", err)
		return exitFailed
	}
	printTree(stdout, t)
	return exitOK
}

// runExit is the exit code of a run that ended as res, saying why when it
// is not done; leaseLost: another process ended the session.
func runExit(res *delegation.Result, leaseLost bool, stderr io.Writer) int {
	switch {
	case leaseLost || errors.Is(res.Err, session.ErrLeaseLost):
		fmt.Fprintln(stderr, "studio run: the lease on the session lapsed: this process was suspended or starved so long that "+
			"another process took the session over and ended it as interrupted; nothing after that end was recorded")
		return exitLeaseLapsed
	case res.Status == delegation.StatusDone:
		return exitOK
	case res.Status == delegation.StatusInterrupted:
		fmt.Fprintln(stderr, "studio run: stopped: the session ended as interrupted")
		return exitInterrupted
	}
	fmt.Fprintf(stderr, "studio run: the session failed: %v\n", res.Err)
	return exitFailed
}

func cmdValidate(args []string, stdout, stderr io.Writer) int {
	c := newCommand("validate", "studio validate SCENARIO.json|lesson:NAME[--VARIANT]",
		"Checks a scenario against the schema and the delegation rules; runs nothing.\nExit codes: 0 valid, 2 invalid (one error per line, each naming its field).", stdout, stderr).
		positional(1, "a scenario file, or lesson:NAME")
	pos, code, ok := c.parse(args)
	if !ok {
		return code
	}
	sc, code := loadScenario(pos[0], scenario.Flags{}, nil, stderr)
	if sc == nil {
		return code
	}
	printWarnings(stderr, sc.Warnings)
	fmt.Fprintf(stdout, "%s: valid: %s (%s), tokenizer %s, model %s\n",
		pos[0], plural(len(sc.Team.Subagents), "subagent"), strings.Join(sc.Team.Names(), ", "), sc.Tokenizer(), sc.Provider)
	return exitOK
}

// loadScenario reads a scenario, a file, or lesson:NAME (its first variant)
// or lesson:NAME--VARIANT, sets the command line's flags over it and checks
// the result. On a problem it prints every error, one per line, each with
// the flag that sets its field (flagFor, nil for none), and returns the
// exit code.
func loadScenario(path string, fl scenario.Flags, flagFor flagFunc, stderr io.Writer) (*scenario.Scenario, int) {
	var doc []byte
	var err error
	if name, ok := strings.CutPrefix(path, "lesson:"); ok {
		doc, err = lessonScenario(name)
	} else {
		doc, err = os.ReadFile(path)
	}
	if err != nil {
		fmt.Fprintf(stderr, "studio: %v\n", err)
		return nil, exitUsage
	}
	sc, err := scenario.ParseWith(context.Background(), doc, fl)
	if err != nil {
		printErrors(stderr, path, err, flagFor)
		return nil, exitUsage
	}
	return sc, exitOK
}

// printErrors prints a scenario's problems, one per line, each naming its
// field and, through flagFor (nil for none), the flag that set that field
// or the one that could.
func printErrors(stderr io.Writer, path string, err error, flagFor flagFunc) {
	var fe delegation.FieldErrors
	if !errors.As(err, &fe) {
		fmt.Fprintf(stderr, "%s: %v\n", path, err)
		return
	}
	for _, e := range fe {
		usage, from := "", ""
		if flagFor != nil && e.Field != "" {
			usage, from = flagFor(e.Field)
		}
		switch {
		case from != "":
			fmt.Fprintf(stderr, "%s: %s (from %s): %s\n", path, e.Field, from, e.Message)
		case usage != "":
			fmt.Fprintf(stderr, "%s: %s; or give %s\n", path, e.Error(), usage)
		default:
			fmt.Fprintf(stderr, "%s: %s\n", path, e.Error())
		}
	}
}

// lessonScenario is the scenario of NAME (its first variant) or of
// NAME--VARIANT, as 'studio lessons' lists them.
func lessonScenario(name string) ([]byte, error) {
	l, err := lessons.Get(name)
	if err == nil {
		return l.Scenario, nil
	}
	base, variant, ok := strings.Cut(name, "--")
	if !ok {
		return nil, err
	}
	l, lerr := lessons.Get(base)
	if lerr != nil {
		return nil, err
	}
	if v, ok := l.Variant(variant); ok {
		return v.Scenario, nil
	}
	names := make([]string, len(l.Variants))
	for i, v := range l.Variants {
		names[i] = variantRef(l, v)
	}
	return nil, fmt.Errorf("lesson %s has no variant %q; run one of %s", base, variant, strings.Join(names, ", "))
}

// variantRef is how a variant is named on the command line.
func variantRef(l lessons.Lesson, v lessons.Variant) string {
	if v.Name == l.Name {
		return "lesson:" + l.Name
	}
	return "lesson:" + l.Name + "--" + v.Name
}

func printWarnings(w io.Writer, warnings delegation.FieldErrors) {
	for _, e := range warnings {
		fmt.Fprintf(w, "warning: %s\n", e.Error())
	}
}

func cmdLessons(args []string, stdout, stderr io.Writer) int {
	c := newCommand("lessons", "studio lessons [--lang en|zh]",
		"Lists the built-in lessons, each with the variants it runs. Run one with\n'studio run lesson:NAME' (its first variant) or 'studio run lesson:NAME--VARIANT'.\nWith --lang zh the titles are the Chinese ones the studio's pages show; the rest stays English.", stdout, stderr)
	lang := c.String("lang", i18n.English, "en", "the `language` of the titles: en, or zh (Simplified Chinese, the articles' language)", nil)
	if _, code, ok := c.parse(args); !ok {
		return code
	}
	if !i18n.Valid(*lang) {
		fmt.Fprintf(stderr, "lang: %q is not a language of the studio: use en or zh\n", *lang)
		return exitUsage
	}
	tr := i18n.Get(*lang)
	for _, l := range lessons.All() {
		fmt.Fprintf(stdout, "%-24s %s\n", l.Name, tr.Text(l.Title))
		if len(l.Variants) > 1 {
			refs := make([]string, len(l.Variants))
			for i, v := range l.Variants {
				refs[i] = strings.TrimPrefix(variantRef(l, v), "lesson:")
			}
			fmt.Fprintf(stdout, "%-24s variants: %s\n", "", strings.Join(refs, ", "))
		}
	}
	return exitOK
}
