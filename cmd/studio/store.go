package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/otlp"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/trace"
)

// dbFlag is the --db flag of the commands that read and write the store:
// $STUDIO_DB, then ./studio.db.
func dbFlag(c *command) *string {
	return c.String("db", "studio.db", "./studio.db", "the database `file`", nil)
}

func openStore(ctx context.Context, path string, stderr io.Writer) (*db.DB, bool) {
	d, err := db.Open(ctx, path)
	if err != nil {
		fmt.Fprintf(stderr, "studio: %v\n", db.Describe(path, err))
		return nil, false
	}
	return d, true
}

func cmdSessions(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("sessions", "studio sessions [--db FILE]",
		"Lists stored sessions, newest first: id, status, name, agents, tokens, age.", stdout, stderr)
	dbPath := dbFlag(c)
	if _, code, ok := c.parse(args); !ok {
		return code
	}
	d, ok := openStore(ctx, *dbPath, stderr)
	if !ok {
		return exitFailed
	}
	defer d.Close()
	list, err := d.Sessions(ctx, 0)
	if err != nil {
		fmt.Fprintf(stderr, "studio: %v\n", err)
		return exitFailed
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tNAME\tAGENTS\tINPUT TOKENS\tCREATED")
	for _, s := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", s.ID, s.Status, s.Name, s.Agents, thousands(s.InputTokens), s.CreatedAt.Local().Format(time.DateTime))
	}
	tw.Flush()
	return exitOK
}

func cmdExport(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("export", "studio export SESSION_ID [--format json|otlp] [--db FILE]",
		"Prints a stored session: its trace (formats.md §2), or its OTLP JSON spans\n(OpenTelemetry GenAI conventions) for tracing tools.", stdout, stderr).
		positional(1, "the id of a stored session (see 'studio sessions')")
	dbPath := dbFlag(c)
	format := c.String("format", "json", "json", "`json` (the trace) or otlp (OpenTelemetry GenAI spans, OTLP JSON)", nil)
	pos, code, ok := c.parse(args)
	if !ok {
		return code
	}
	id := pos[0]
	if *format != "json" && *format != "otlp" {
		return c.fail("unknown format %q; use json or otlp", *format)
	}
	d, ok := openStore(ctx, *dbPath, stderr)
	if !ok {
		return exitFailed
	}
	defer d.Close()
	t, err := d.Trace(ctx, id)
	if err != nil {
		fmt.Fprintf(stderr, "studio: %v\n", err)
		if delegation.ErrorCode(err) == delegation.ENOTFOUND {
			return exitUsage
		}
		return exitFailed
	}
	if *format == "otlp" {
		doc, err := otlp.Export(t)
		if err != nil {
			fmt.Fprintf(stderr, "studio: %v\n", err)
			return exitFailed
		}
		stdout.Write(append(doc, '\n'))
		return exitOK
	}
	return writeJSON(stdout, stderr, t)
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

func writeJSON(stdout, stderr io.Writer, v any) int {
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(stderr, "studio: %v\n", err)
		return exitFailed
	}
	return exitOK
}
