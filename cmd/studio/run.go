package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/lessons"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/trace"
)

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the session's trace as JSON instead of the tree")
	dbPath := fs.String("db", "", "store the session in this database `file`; its id is the trace's session.id (default: keep nothing)")
	modelURL := fs.String("model-url", "", "run against this OpenAI-compatible endpoint (`URL`, e.g. http://127.0.0.1:8080/v1) instead of the script")
	modelName := fs.String("model", "", "the `name` of the model to call at --model-url (or at OpenAI with OPENAI_API_KEY)")
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: studio run SCENARIO.json|lesson:NAME [--json] [--db FILE] [--model-url URL --model NAME]\n\nRuns a scenario (or a built-in lesson) headless and prints its delegation tree, or its trace with --json.\nExit codes: 0 done, 1 the session failed, 2 bad scenario.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	path, ok := parseOneArg(fs, args, stderr)
	if !ok {
		return exitUsage
	}
	sc, code := loadScenario(path, stderr)
	if sc == nil {
		return code
	}
	if *modelURL != "" || *modelName != "" {
		if sc, code = withModel(sc, *modelURL, *modelName, stderr); sc == nil {
			return code
		}
	}
	printWarnings(stderr, sc.Warnings)

	var t *trace.Trace
	var res *delegation.Result
	if *dbPath != "" {
		d, ok := openStore(ctx, *dbPath, stderr)
		if !ok {
			return exitFailed
		}
		defer d.Close()
		var id string
		var err error
		if id, res, err = (&session.Runner{DB: d}).Run(ctx, sc); err != nil {
			fmt.Fprintf(stderr, "studio: %v\n", err)
			return exitFailed
		}
		if t, err = d.Trace(ctx, id); err != nil {
			fmt.Fprintf(stderr, "studio: %v\n", err)
			return exitFailed
		}
	} else {
		var events []delegation.Event
		sink := delegation.SinkFunc(func(e delegation.Event) {
			if e.Seq > 0 {
				events = append(events, e)
			}
		})
		id := session.NewID()
		var err error
		if res, err = session.Run(ctx, sc, session.RunOptions{SessionID: id, Sink: sink}); err != nil {
			fmt.Fprintf(stderr, "studio: %v\n", err)
			return exitUsage
		}
		if t, err = trace.Build(trace.Meta{ID: id, Title: sc.File.Title, Scenario: sc.Raw}, events); err != nil {
			fmt.Fprintf(stderr, "studio: build the trace: %v\n", err)
			return exitFailed
		}
	}
	if *asJSON {
		if code := writeJSON(stdout, stderr, t); code != exitOK {
			return code
		}
	} else {
		printTree(stdout, t)
	}
	if res.Status != delegation.StatusDone {
		fmt.Fprintf(stderr, "studio: the session failed: %v\n", res.Err)
		return exitFailed
	}
	return exitOK
}

func cmdValidate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: studio validate SCENARIO.json\n\nChecks a scenario against the schema and the delegation rules; runs nothing.\nExit codes: 0 valid, 2 invalid (one error per line, each naming its field).\n")
	}
	path, ok := parseOneArg(fs, args, stderr)
	if !ok {
		return exitUsage
	}
	sc, code := loadScenario(path, stderr)
	if sc == nil {
		return code
	}
	printWarnings(stderr, sc.Warnings)
	fmt.Fprintf(stdout, "%s: valid: %d subagents (%s), tokenizer %s, model %s\n",
		path, len(sc.Team.Subagents), strings.Join(sc.Team.Names(), ", "), sc.Tokenizer(), sc.Provider)
	return exitOK
}

// parseOneArg parses flags placed before or after the one positional
// argument.
func parseOneArg(fs *flag.FlagSet, args []string, stderr io.Writer) (string, bool) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return "", false
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) != 1 {
		fmt.Fprintf(stderr, "studio %s: give exactly one scenario file\n", fs.Name())
		fs.Usage()
		return "", false
	}
	return pos[0], true
}

// loadScenario reads and checks a scenario; on a problem it prints every
// error, one per line, and returns the exit code.
func loadScenario(path string, stderr io.Writer) (*scenario.Scenario, int) {
	var doc []byte
	var err error
	if name, ok := strings.CutPrefix(path, "lesson:"); ok {
		var l lessons.Lesson
		if l, err = lessons.Get(name); err == nil {
			doc = l.Scenario
		}
	} else {
		doc, err = os.ReadFile(path)
	}
	if err != nil {
		fmt.Fprintf(stderr, "studio: %v\n", err)
		return nil, exitUsage
	}
	sc, err := scenario.Parse(doc)
	if err != nil {
		var fe delegation.FieldErrors
		if errors.As(err, &fe) {
			for _, e := range fe {
				fmt.Fprintf(stderr, "%s: %s\n", path, e.Error())
			}
		} else {
			fmt.Fprintf(stderr, "%s: %v\n", path, err)
		}
		return nil, exitUsage
	}
	return sc, exitOK
}

func printWarnings(w io.Writer, warnings delegation.FieldErrors) {
	for _, e := range warnings {
		fmt.Fprintf(w, "warning: %s\n", e.Error())
	}
}

func cmdLessons(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprint(stderr, "Usage: studio lessons\n\nLists the built-in lessons; run one with 'studio run lesson:NAME'.\n")
		return exitUsage
	}
	for _, l := range lessons.All() {
		fmt.Fprintf(stdout, "%-24s %s\n", l.Name, l.Title)
	}
	return exitOK
}

// withModel points a scenario at an OpenAI-compatible endpoint.
func withModel(sc *scenario.Scenario, url, name string, stderr io.Writer) (*scenario.Scenario, int) {
	if name == "" {
		fmt.Fprintln(stderr, "studio run: --model-url needs --model NAME too")
		return nil, exitUsage
	}
	out, err := scenario.WithEndpoint(sc, url, name)
	if err != nil {
		fmt.Fprintf(stderr, "studio run: %v\n", err)
		return nil, exitUsage
	}
	return out, exitOK
}
