package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/session"
)

// A session whose process is gone (killed, crashed, suspended) still reads
// as running until its lease lapses and someone ends it: a server does so
// while it serves. The reading commands say what is true of such a session
// and, when no server holds the file and it may be written, end it as the
// server would.

// lapse is what the reading commands know of a session whose lease lapsed.
type lapse struct {
	until time.Time // when the lease ran out
	ended bool      // this command ended the session as interrupted
}

// errServed is why a reading command leaves a lapsed session to the server.
var errServed = errors.New("a studio serve holds the file: it ends such sessions itself, within a third of a lease, and pushes their spans")

// settleLapsed finds the sessions of list whose lease lapsed by the store's
// clock and, unless a server holds the file or it is read-only (roReason,
// a db.ReadOnly* code), ends them as interrupted
// through the same path as serve (session.Runner.Recover, which ends every
// lapsed session of the store). It returns what it knows of each, by id,
// and says on stderr why it ended none when it could not.
func settleLapsed(ctx context.Context, d store, dbPath, roReason string, list []db.Session, stderr io.Writer, cmd string) map[string]lapse {
	now := d.Now()
	lapses := map[string]lapse{}
	for _, s := range list {
		if s.Lapsed(now) {
			lapses[s.ID] = lapse{until: s.LeaseUntil}
		}
	}
	if len(lapses) == 0 {
		return nil
	}
	ended, err := endLapsed(ctx, d, dbPath, roReason)
	for _, id := range ended {
		if l, ok := lapses[id]; ok {
			l.ended = true
			lapses[id] = l
		}
	}
	if err != nil {
		open := 0
		for _, l := range lapses {
			if !l.ended {
				open++
			}
		}
		verb := "read"
		if open == 1 {
			verb = "reads"
		}
		fmt.Fprintf(stderr, "studio %s: %s whose process is gone still %s as running: %v\n", cmd, plural(open, "session"), verb, err)
	}
	return lapses
}

// endLapsed ends the store's lapsed sessions as serve ends them, unless a
// server holds the file or it is read-only; it returns their ids.
func endLapsed(ctx context.Context, d store, dbPath, roReason string) ([]string, error) {
	if roReason != "" {
		return nil, fmt.Errorf("the database is read-only (%s): the next studio that may write it ends such sessions", readOnlyWhy(roReason))
	}
	served, err := db.Served(dbPath)
	if err != nil {
		return nil, err
	}
	if served {
		return nil, errServed
	}
	var ended []string
	r := &session.Runner{DB: d, Ended: func(id string) { ended = append(ended, id) }}
	if _, err := r.Recover(ctx); err != nil {
		return ended, fmt.Errorf("could not end it here: %w", err)
	}
	return ended, nil
}

// status is a session's status as the reading commands show it: with its
// lapse, when its lease lapsed.
func (l lapse) status(now time.Time) string {
	if l.ended {
		return "interrupted (ended now: its lease lapsed " + ago(now.Sub(l.until)) + ", its process is gone)"
	}
	return "running (lease lapsed " + ago(now.Sub(l.until)) + ": its process is gone)"
}

// ago says briefly how long ago a moment d back was.
func ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h ago", int(d.Hours()))
	}
	return fmt.Sprintf("%d days ago", int(d.Hours()/24))
}
