package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
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

// defaultDB is where the studio keeps sessions when --db is not given: the
// STUDIO_DB environment variable, then ./studio.db.
func defaultDB() string {
	if p := os.Getenv("STUDIO_DB"); p != "" {
		return p
	}
	return "studio.db"
}

func openStore(ctx context.Context, path string, stderr io.Writer) (*db.DB, bool) {
	d, err := db.Open(ctx, path)
	if err != nil {
		fmt.Fprintf(stderr, "studio: %v\n", err)
		return nil, false
	}
	return d, true
}

func cmdSessions(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sessions", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbPath := fs.String("db", defaultDB(), "the database `file` (default $STUDIO_DB, then ./studio.db)")
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: studio sessions [--db FILE]\n\nLists stored sessions, newest first: id, status, name, agents, tokens, age.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		if fs.NArg() > 0 {
			fs.Usage()
		}
		return exitUsage
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
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbPath := fs.String("db", defaultDB(), "the database `file` (default $STUDIO_DB, then ./studio.db)")
	format := fs.String("format", "json", "`json` (the trace) or otlp (OpenTelemetry GenAI spans, OTLP JSON)")
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: studio export SESSION_ID [--format json|otlp] [--db FILE]\n\nPrints a stored session: its trace, or its OTLP JSON spans.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	id, ok := parseOneArg(fs, args, stderr)
	if !ok {
		return exitUsage
	}
	if *format != "json" && *format != "otlp" {
		fmt.Fprintf(stderr, "studio export: unknown format %q; use json or otlp\n", *format)
		return exitUsage
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
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbPath := fs.String("db", defaultDB(), "the database `file` (default $STUDIO_DB, then ./studio.db)")
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: studio import TRACE.json [--db FILE]\n\nChecks a trace whole and stores it as a new session; prints its id.\nNothing is written when anything is wrong.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	path, ok := parseOneArg(fs, args, stderr)
	if !ok {
		return exitUsage
	}
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
	id, err := (&session.Runner{DB: d}).Import(ctx, raw)
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
	fmt.Fprintln(stdout, id)
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
