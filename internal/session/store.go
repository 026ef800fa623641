package session

import (
	"context"
	"time"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

// Store is where the runner keeps sessions: their rows and their logs, the
// leases on the running ones, and the page states of the ended ones. The
// studio's SQLite store (db.DB) is one; a store of another engine is one
// more implementation, tested by the same suite (internal/storetest).
type Store interface {
	// Now is the store's clock: of leases, and of what sessions record.
	Now() time.Time
	// CreateSession stores a new session before its first event.
	CreateSession(ctx context.Context, s *db.Session) error
	// AppendEvents appends events of a session's log in one transaction:
	// the events, and what they introduced or changed. Seq must follow the
	// log's last without a gap, and only a running session's log grows.
	AppendEvents(ctx context.Context, sessionID string, events []delegation.Event) error
	// FinishOpen ends a session still marked running, as a live one ends,
	// by appending its closing events, with why as a code and a reason; it
	// reports whether it was running. A full disk does not stop it.
	FinishOpen(ctx context.Context, id, status, code, reason string) (bool, error)
	// RenewLeases extends, to until, the lease of every running session
	// owner holds.
	RenewLeases(ctx context.Context, owner string, until time.Time) error
	// Recover ends as interrupted every running session whose lease has
	// run out, by appending its closing events; it returns their ids.
	Recover(ctx context.Context) ([]string, error)
	// Import stores a checked trace as a new session with id, through the
	// same append as a live session's events, all of it or nothing.
	Import(ctx context.Context, id string, t *trace.Trace) error
	// ReadPage begins a read of the rows a session's page shows.
	ReadPage(ctx context.Context, id string) (db.PageReader, error)
	// SaveView stores a session's page state at a seq.
	SaveView(ctx context.Context, id string, seq int64, version int, state []byte) error
}

var _ Store = (*db.DB)(nil)
