// Command studio runs Delegation Studio: the web studio (the default
// command) and the headless tools that run, check and move sessions.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `studio: see, teach and debug how an AI agent delegates work to subagents.

Usage:
  studio [serve] [--addr 127.0.0.1:7788] [--db FILE] [--token TOKEN] [--model-url URL --model NAME]
                                                  the web studio (the default command)
  studio run SCENARIO.json|lesson:NAME [--json] [--db FILE] [--model-url URL --model NAME]
                                                  run a scenario headless; --json prints the trace
  studio validate SCENARIO.json                   check a scenario, run nothing
  studio lessons                                  list the built-in lessons
  studio sessions [--db FILE]                     list stored sessions: id, status, name
  studio export SESSION_ID [--format json|otlp] [--db FILE]
                                                  print a stored session
  studio import TRACE.json [--db FILE]            store a trace, print its new id

--db defaults to $STUDIO_DB, then ./studio.db (run keeps nothing without it).

Run 'studio COMMAND --help' for a command's flags.

Exit codes: 0 done, 1 the session failed, 2 bad input (one error per line,
each naming its field).
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

// run dispatches a command line; it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (len(args[0]) > 1 && args[0][0] == '-' && !isHelp(args[0])) {
		return cmdServe(ctx, args, stdout, stderr)
	}
	switch args[0] {
	case "serve":
		return cmdServe(ctx, args[1:], stdout, stderr)
	case "run":
		return cmdRun(ctx, args[1:], stdout, stderr)
	case "validate":
		return cmdValidate(args[1:], stdout, stderr)
	case "lessons":
		return cmdLessons(args[1:], stdout, stderr)
	case "sessions":
		return cmdSessions(ctx, args[1:], stdout, stderr)
	case "export":
		return cmdExport(ctx, args[1:], stdout, stderr)
	case "import":
		return cmdImport(ctx, args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "studio: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
}

func isHelp(a string) bool { return a == "-h" || a == "-help" || a == "--help" }
