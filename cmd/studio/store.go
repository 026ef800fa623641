package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/otlp"
	"github.com/delegationstudio/studio/internal/server"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/trace"
)

// dbFlag is the --db flag of the commands that read and write the store:
// $STUDIO_DB, then ./studio.db.
func dbFlag(c *command) *string {
	return c.String("db", "studio.db", "./studio.db", "the database: a SQLite `file`, or a postgres://USER@HOST/DB URL that several studios share (docs/postgres.md)", nil)
}

// store is what the commands use of a store: what the server uses, and
// closing it. The store is chosen here and nowhere else: db.Open opens a
// SQLite file, or a PostgreSQL database for a postgres:// URL.
type store interface {
	server.Store
	Close() error
}

// openStore opens the store the --db flag names for a command that writes
// it (migrating an old file), saying on stderr what went wrong when it
// cannot: a file it may not write (db.ReadOnlyReason) among them, and how
// to write one.
func openStore(ctx context.Context, path string, stderr io.Writer) (store, bool) {
	if reason := db.ReadOnlyReason(path); reason != "" {
		fmt.Fprintf(stderr, "studio: the database %s is read-only (%s), and this command writes it: %s\n",
			path, readOnlyWhy(reason), readOnlyFix(reason))
		return nil, false
	}
	d, err := db.Open(ctx, path)
	if err != nil {
		fmt.Fprintf(stderr, "studio: %v\n", db.Describe(db.Redacted(path), err))
		return nil, false
	}
	return d, true
}

// openReading opens the store for a command that only reads it: read-only
// (no migration, nothing written) when it may not be written, saying why
// (a db.ReadOnly* code), else as openStore does.
func openReading(ctx context.Context, path string, stderr io.Writer) (store, string, bool) {
	if reason := db.ReadOnlyReason(path); reason != "" {
		d, ok := openReadOnly(ctx, path, stderr)
		return d, reason, ok
	}
	d, ok := openStore(ctx, path, stderr)
	return d, "", ok
}

// openReadOnly opens a SQLite file read-only (db.OpenReadOnly), saying on
// stderr what went wrong when it cannot.
func openReadOnly(ctx context.Context, path string, stderr io.Writer) (store, bool) {
	d, err := db.OpenReadOnly(ctx, path)
	if err != nil {
		fmt.Fprintf(stderr, "studio: %v\n", err)
		return nil, false
	}
	return d, true
}

// readOnlyFix says how to make a read-only database (a db.ReadOnly* code)
// one a command may write.
func readOnlyFix(reason string) string {
	if reason == db.ReadOnlyMount {
		return "remount it read-write, or give --db a copy on a writable disk"
	}
	return "run as a user who may write the file and its folder, let this one (chmod, chown), or give --db a writable copy"
}

func cmdSessions(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("sessions", "studio sessions [--json] [--status S] [--origin O] [--limit N] [--db FILE]",
		`Lists stored sessions, newest first: id, status, origin, name, agents, tokens,
age; --json prints them as GET /api/sessions does, one JSON array.
A session whose process is gone (killed, crashed, suspended) reads as running
until its lease lapses (30 s): it is then shown so, and, unless a studio serve
holds the file (which ends it itself), ended as interrupted, as serve ends it.
A database this user may not write (a read-only mount, file or folder) is read
read-only: nothing is migrated or ended.`, stdout, stderr)
	dbPath := dbFlag(c)
	asJSON := c.Bool("json", "print the list as JSON: the fields of GET /api/sessions", nil)
	status := c.String("status", "", "", "list only the sessions of this status: "+strings.Join(delegation.Statuses(), ", "), nil)
	origin := c.String("origin", "", "", "list only the sessions from here: "+strings.Join(delegation.Origins(), ", ")+
		" (our engine, a received or imported OTLP trace, the recording endpoint)", nil)
	limit := c.fs.Int("limit", 0, "list at most this many, the newest (0: all)")
	c.add("limit", "", nil)
	if _, code, ok := c.parse(args); !ok {
		return code
	}
	f, err := server.SessionFilterOf(*status, *origin, *limit)
	if err != nil {
		return c.fail("%v", err)
	}
	d, roReason, ok := openReading(ctx, *dbPath, stderr)
	if !ok {
		return exitFailed
	}
	defer d.Close()
	list, lapses, err := listSessions(ctx, d, *dbPath, roReason, f, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "studio: %v\n", err)
		return exitFailed
	}
	now := d.Now()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(server.SessionLines(list, now)); err != nil {
			fmt.Fprintf(stderr, "studio: %v\n", err)
			return exitFailed
		}
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tORIGIN\tNAME\tAGENTS\tINPUT TOKENS\tCREATED")
	for _, s := range list {
		status := s.Status
		if l, ok := lapses[s.ID]; ok {
			status = l.status(now)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", s.ID, status, s.Origin, s.Name, s.Agents, thousands(s.InputTokens),
			s.CreatedAt.Local().Format(time.DateTime))
	}
	tw.Flush()
	return exitOK
}

// listSessions lists the sessions f picks, after ending those whose lease
// lapsed when it may (settleLapsed), and says which lapsed.
func listSessions(ctx context.Context, d store, dbPath, roReason string, f db.SessionFilter, stderr io.Writer) ([]db.Session, map[string]lapse, error) {
	// The lapsed are looked for among all running sessions: one that
	// ends changes status, and so whether f picks it.
	running, err := d.SessionsWhere(ctx, db.SessionFilter{Status: delegation.StatusRunning})
	if err != nil {
		return nil, nil, err
	}
	lapses := settleLapsed(ctx, d, dbPath, roReason, running, stderr, "sessions")
	list, err := d.SessionsWhere(ctx, f)
	return list, lapses, err
}

func cmdExport(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("export", "studio export SESSION_ID [--format json|otlp|otlp-proto] [--db FILE]\n"+
		"       studio export SESSION_ID --otlp-endpoint URL | --push [--otlp-protocol http/protobuf|http/json]",
		`Prints a stored session: its trace (formats.md §2), or its OpenTelemetry
spans (GenAI conventions) as OTLP/JSON or protobuf; or pushes the spans to an
OTLP/HTTP collector (Jaeger, Langfuse, Phoenix, an OpenTelemetry Collector).
A push honours OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
OTEL_EXPORTER_OTLP_HEADERS and OTEL_EXPORTER_OTLP_PROTOCOL, and sends every
finished span, whatever went to that endpoint before. A running session's export holds only
its finished spans. A session whose process is gone and whose lease lapsed is
ended as interrupted first, as 'studio sessions' ends it. A database this user
may not write is read read-only: nothing is ended, and a push is not recorded
(the next one sends every span again). See docs/otlp.md.`, stdout, stderr).
		positional(1, "the id of a stored session (see 'studio sessions')")
	dbPath := dbFlag(c)
	format := c.String("format", "json", "json", "`json` (the trace), otlp (OpenTelemetry spans, OTLP/JSON) or otlp-proto (OTLP protobuf)", nil)
	pretty := c.Bool("pretty", "indent the trace (json)", nil)
	inputs := c.String("inputs", "new", "new", "what each chat span's gen_ai.input.messages holds: `new` (the messages the call added) or full (its whole input, capped)", nil)
	inputCap := c.String("input-cap", strconv.Itoa(otlp.DefaultInputCap), strconv.Itoa(otlp.DefaultInputCap),
		"with --inputs full: the most `bytes` of input per span; older messages are left out first", nil)
	conventions := c.String("conventions", "genai", "genai", "the attribute `conventions`: genai, or genai,openinference (for Arize Phoenix)", nil)
	after := c.String("after", "0", "", "leave out the spans finished by this `seq` (a running session's earlier export said it)", nil)
	endpoint := c.String("otlp-endpoint", "", "", "push the spans to this OTLP/HTTP `URL` (base, e.g. http://localhost:4318) instead of printing them", []string{})
	push := c.Bool("push", "push the spans to $"+otlp.EnvTracesEndpoint+" or $"+otlp.EnvEndpoint, nil)
	protocol := c.String("otlp-protocol", "", "http/protobuf", "how to push: `http/protobuf` or http/json", []string{otlp.EnvTracesProtocol, otlp.EnvProtocol})
	pos, code, ok := c.parse(args)
	if !ok {
		return code
	}
	id := pos[0]
	opts, problems := exportOptions(*inputs, *inputCap, *conventions, *after)
	pushing := *push || *endpoint != ""
	if pushing && *format == "json" && c.given("format") == "flag" {
		problems = append(problems, "--format json is the trace, which is not pushed: drop --format, or leave out --otlp-endpoint")
	}
	if !pushing && *format != "json" && *format != "otlp" && *format != "otlp-proto" {
		problems = append(problems, fmt.Sprintf("unknown format %q; use json, otlp or otlp-proto", *format))
	}
	var cfg otlp.PushConfig
	if pushing {
		var found bool
		var err error
		cfg, found, err = otlp.ConfigFromEnv(*endpoint, *protocol, os.Getenv)
		switch {
		case err != nil:
			problems = append(problems, err.Error())
		case !found:
			problems = append(problems, "--push needs an endpoint: set "+otlp.EnvEndpoint+" (or "+otlp.EnvTracesEndpoint+"), or give --otlp-endpoint URL")
		}
	}
	if *format == "otlp-proto" && !pushing && isTerminal(stdout) {
		problems = append(problems, "otlp-proto is binary: send it to a file, e.g. studio export "+id+" --format otlp-proto > session.otlp.pb")
	}
	if len(problems) > 0 {
		for _, p := range problems[:len(problems)-1] {
			fmt.Fprintf(stderr, "studio export: %s\n", p)
		}
		return c.fail("%s", problems[len(problems)-1])
	}
	d, roReason, ok := openReading(ctx, *dbPath, stderr)
	if !ok {
		return exitFailed
	}
	defer d.Close()
	if s, err := d.Session(ctx, id); err == nil {
		if l, ok := settleLapsed(ctx, d, *dbPath, roReason, []db.Session{*s}, stderr, "export")[id]; ok {
			fmt.Fprintf(stderr, "studio export: session %s: %s\n", id, l.status(d.Now()))
		}
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "studio: %v\n", err)
		if delegation.ErrorCode(err) == delegation.ENOTFOUND {
			return exitUsage
		}
		return exitFailed
	}
	if pushing {
		return exportPush(ctx, d, roReason, cfg, id, opts, stdout, fail)
	}
	return exportPrint(ctx, d, id, *format, *pretty, opts, stdout, stderr, fail)
}

// exportPush pushes a stored session's spans (export --push, or
// --otlp-endpoint); from a read-only store, without recording the push.
func exportPush(ctx context.Context, d store, roReason string, cfg otlp.PushConfig, id string, opts otlp.Options, stdout io.Writer, fail func(error) int) int {
	p, err := otlp.NewPusher(cfg)
	if err != nil {
		return fail(err)
	}
	var ps otlp.Store[db.Reader] = d
	if roReason != "" {
		ps = unmarked{d}
	}
	sum, before, err := otlp.PushSession(ctx, ps, p, id, opts)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "Pushed %d spans of session %s to %s (%s).\n", sum.Spans, id, p.Endpoint(), p.Protocol())
	if roReason != "" {
		fmt.Fprintf(stdout, "The push is not recorded: the database is read-only (%s).\n", readOnlyWhy(roReason))
	}
	if sum.Sent > 0 {
		fmt.Fprintf(stdout, "%d spans finished by seq %d were left out, as --after asked.\n", sum.Sent, opts.After)
	}
	if before > 0 {
		fmt.Fprintf(stdout, "It had been pushed there before (through seq %d); every span was sent again, with the same span ids.\n", before)
	}
	if sum.Running {
		fmt.Fprintf(stdout, "The session is still running: its %d unfinished spans go with the next push.\n", sum.Open)
	}
	return exitOK
}

// exportPrint prints a stored session in a format: its trace, or its spans.
func exportPrint(ctx context.Context, d store, id, format string, pretty bool, opts otlp.Options, stdout, stderr io.Writer, fail func(error) int) int {
	err := d.Read(ctx, id, func(r db.Reader) error {
		var sum otlp.Summary
		var err error
		switch format {
		case "json":
			return trace.Write(stdout, r, pretty)
		case "otlp":
			sum, err = otlp.WriteJSON(stdout, r, opts)
		default:
			// Protobuf is bytes for a file, not text for a terminal: it
			// must not be escaped (and a terminal was refused above).
			sum, err = otlp.WriteProto(binaryOutput(stdout), r, opts)
		}
		if err == nil && sum.Running {
			fmt.Fprintf(stderr, "studio export: session %s is still running: its %d unfinished spans are left out; export them later with --after %d\n",
				id, sum.Open, sum.LastSeq)
		}
		return err
	})
	if err != nil {
		return fail(err)
	}
	return exitOK
}

// unmarked is a read-only store pushed from: what went where is not
// recorded (SetPushedSeq), as nothing may be written.
type unmarked struct{ store }

func (unmarked) SetPushedSeq(context.Context, string, string, int64) error { return nil }

// exportOptions reads the OTLP export's flags; it returns every problem.
func exportOptions(inputs, inputCap, conventions, after string) (otlp.Options, []string) {
	var opts otlp.Options
	var problems []string
	var err error
	if opts.Inputs, err = otlp.ParseInputs(inputs); err != nil {
		problems = append(problems, "--"+err.Error())
	}
	if opts.InputCap, err = strconv.Atoi(inputCap); err != nil || opts.InputCap <= 0 {
		problems = append(problems, fmt.Sprintf("--input-cap %q: give the cap in bytes, a whole number more than 0", inputCap))
	}
	if opts.OpenInference, err = otlp.ParseConventions(conventions); err != nil {
		problems = append(problems, "--"+err.Error())
	}
	if opts.After, err = strconv.ParseInt(after, 10, 64); err != nil || opts.After < 0 {
		problems = append(problems, fmt.Sprintf("--after %q: give a seq of the session's log, 0 or more", after))
	}
	return opts, problems
}

func cmdImport(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("import", "studio import FILE [--db FILE]",
		`Stores a file as new sessions and prints their ids, one per line. FILE is a
trace (as studio export writes it) or an OTLP trace file, JSON or protobuf (an
ExportTraceServiceRequest, as OpenTelemetry's exporters send it): each OTLP
trace in it becomes a session, mapped as studio serve maps received spans
(docs/ingest.md). Each session is checked whole before it is written.`, stdout, stderr).
		positional(1, "a trace file, as 'studio export' writes it, or an OTLP file (JSON or protobuf)")
	dbPath := dbFlag(c)
	pos, code, ok := c.parse(args)
	if !ok {
		return code
	}
	path := pos[0]
	raw, err := readLimited(path, trace.MaxBytes)
	if err != nil {
		fmt.Fprintf(stderr, "studio: %v\n", err)
		return exitUsage
	}
	d, ok := openStore(ctx, *dbPath, stderr)
	if !ok {
		return exitFailed
	}
	defer d.Close()
	ids, err := (&session.Runner{DB: d}).ImportFile(ctx, raw)
	for _, id := range ids {
		fmt.Fprintln(stdout, id)
	}
	if err != nil {
		var e *delegation.Error
		if errors.As(err, &e) && len(e.Fields) > 0 {
			for _, f := range e.Fields {
				fmt.Fprintf(stderr, "%s: %s\n", path, f.Error())
			}
		} else {
			fmt.Fprintf(stderr, "%s: %v\n", path, err)
		}
		if delegation.ErrorCode(err) == delegation.EINTERNAL {
			return exitFailed
		}
		return exitUsage
	}
	return exitOK
}

// readLimited reads a file, refusing one larger than max before reading it.
func readLimited(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > max {
		return nil, fmt.Errorf("%s is %d bytes; the most a trace may have is %d", path, st.Size(), max)
	}
	return io.ReadAll(io.LimitReader(f, max+1))
}

// writeTrace writes a session's trace indented, as `studio export --pretty`
// and the server's export write it: streamed part by part (trace.Write),
// never held whole as JSON. Its bytes are json.MarshalIndent's of the
// whole trace and a newline.
func writeTrace(stdout, stderr io.Writer, src trace.Source) int {
	if err := trace.Write(stdout, src, true); err != nil {
		fmt.Fprintf(stderr, "studio: %v\n", err)
		return exitFailed
	}
	return exitOK
}

// binaryOutput is where bytes meant for a file go: the writer itself, not
// the escaping that keeps text printed for a terminal harmless.
func binaryOutput(w io.Writer) io.Writer {
	if s, ok := w.(*safeWriter); ok {
		return s.w
	}
	return w
}
