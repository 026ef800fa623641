// Command studio runs Delegation Studio: the web studio (the default
// command) and the headless tools that run, check and move sessions.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/delegationstudio/studio/internal/delegation"
)

const usage = `studio: see, teach and debug how an AI agent delegates work to subagents.

Usage:
  studio [serve] [--addr HOST:PORT] [--db FILE] [--endpoint NAME=[PROVIDER:]URL[,KEY_ENV[,MODEL]]]...
         [--model-url URL --model NAME] [--config FILE] [--allowed-host NAME]... [--token-file FILE]
                                       the web studio (the default command); it also
                                       receives OTLP traces at POST /v1/traces
                                       and, with --otlp-endpoint, pushes each session's
                                       spans to an OTLP endpoint as it ends
  studio run SCENARIO.json|lesson:NAME[--VARIANT] [--json] [--db FILE] [--model-url URL --model NAME]
                                       run a scenario headless; --json prints the trace
  studio validate SCENARIO.json        check a scenario, run nothing
  studio lessons [--lang zh]           list the built-in lessons and their variants
                                       (--lang zh: their Chinese titles)
  studio sessions [--json] [--status S] [--origin O] [--limit N] [--db FILE]
                                       list stored sessions: id, status, origin, name;
                                       --json as GET /api/sessions gives them
  studio export SESSION_ID [--format json|otlp|otlp-proto] [--db FILE]
                                       print a stored session: its trace or its spans
  studio export SESSION_ID --otlp-endpoint URL | --push
                                       push its spans to an OTLP/HTTP collector
  studio import FILE [--db FILE]       store a trace or an OTLP file (JSON or protobuf),
                                       print the new sessions' ids
  studio help [COMMAND]                this text, or a command's flags
  studio --version                     the version and commit it was built from

--db FILE is a SQLite file, or a postgres:// URL: a PostgreSQL database that
several studios share, each serving the sessions of all (docs/postgres.md).

Every flag can be set in the environment instead: STUDIO_<FLAG> (STUDIO_DB,
STUDIO_MODEL, ...); --model-url also reads OPENAI_BASE_URL and the key comes
from OPENAI_API_KEY, as OpenAI's SDKs read them; --otlp-endpoint and
--otlp-protocol read OTEL_EXPORTER_OTLP_*, as OpenTelemetry's SDKs do.

Exit codes: 0 done, 1 the session failed, 2 bad input (one error per line,
each naming its field), 3 run --db's lease on its session lapsed (the process
was suspended or starved) and another process ended the session, 130 stopped
by Ctrl-C.
`

func main() {
	sig, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// A signal stops a run saying so: its session records why it stopped.
	ctx, cancel := context.WithCancelCause(context.Background())
	context.AfterFunc(sig, func() { cancel(delegation.Stopped{By: delegation.StopSignal}) })
	go func() {
		// After the first Ctrl-C, which stops the session, a second one
		// kills the process as usual.
		<-sig.Done()
		stop()
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	cancel(nil)
	os.Exit(code)
}

// Exit codes.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitLeaseLapsed = 3   // run --db: the session's lease lapsed and another process ended it
	exitInterrupted = 130 // 128 + SIGINT, as shells report a command Ctrl-C stopped
)

// commands are the subcommands by name.
var commands = map[string]func(ctx context.Context, args []string, stdout, stderr io.Writer) int{
	"serve": cmdServe,
	"run":   cmdRun,
	"validate": func(_ context.Context, args []string, stdout, stderr io.Writer) int {
		return cmdValidate(args, stdout, stderr)
	},
	"lessons": func(_ context.Context, args []string, stdout, stderr io.Writer) int {
		return cmdLessons(args, stdout, stderr)
	},
	"sessions": cmdSessions,
	"export":   cmdExport,
	"import":   cmdImport,
}

// run dispatches a command line; it returns the exit code. What it prints
// is shown, never obeyed, by a terminal (safeWriter).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	out, errOut := newSafeWriter(stdout), newSafeWriter(stderr)
	defer out.flush()
	defer errOut.flush()
	return dispatch(ctx, args, out, errOut)
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		return cmdServe(ctx, args, stdout, stderr)
	}
	switch a := args[0]; {
	case a == "--version" || a == "-version" || a == "version":
		fmt.Fprintln(stdout, version())
		return exitOK
	case a == "help" || isHelp(a):
		if len(args) > 1 && a == "help" {
			// help CMD is CMD -h.
			if cmd, ok := commands[args[1]]; ok {
				return cmd(ctx, []string{"-h"}, stdout, stderr)
			}
			fmt.Fprintf(stderr, "studio help: unknown command %q; the commands are %s\n", args[1], commandNames())
			return exitUsage
		}
		fmt.Fprint(stdout, usage)
		return exitOK
	case strings.HasPrefix(a, "-"):
		return cmdServe(ctx, args, stdout, stderr)
	}
	if cmd, ok := commands[args[0]]; ok {
		return cmd(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "studio: unknown command %q; the commands are %s\nRun 'studio help' for more.\n", args[0], commandNames())
	return exitUsage
}

func commandNames() string {
	return "serve, run, validate, lessons, sessions, export, import, help"
}

func isHelp(a string) bool { return a == "-h" || a == "-help" || a == "--help" }

// buildCommit is the commit, for a build the Go toolchain could not stamp
// (a git worktree, or GOFLAGS=-buildvcs=false): make build sets it with
// -ldflags "-X main.buildCommit=…".
var buildCommit string

// version is the module version and the commit the binary was built from,
// as the Go toolchain stamped them.
func version() string {
	v, rev, when, dirty := "(devel)", buildCommit, "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if r, ok := strings.CutSuffix(rev, "+dirty"); ok {
		rev, dirty = r, true
	}
	out := "studio " + v
	var about []string
	if rev != "" {
		about = append(about, "commit "+rev[:min(len(rev), 12)])
	}
	if when != "" {
		about = append(about, when)
	}
	if dirty {
		about = append(about, "with uncommitted changes")
	}
	if len(about) > 0 {
		out += " (" + strings.Join(about, ", ") + ")"
	}
	return out + " " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
}
