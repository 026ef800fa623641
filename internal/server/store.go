package server

import (
	"context"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/trace"
)

// Store is what the server keeps and reads: the runner's store (sessions,
// their logs, leases, page states) and the reads of the pages, the API, the
// exports and the live stream, the team editor's teams, the marks of OTLP
// pushes, and the counts of /metrics and /healthz. The studio's SQLite
// store (db.DB) is one; a store of another engine is one more, tested by
// the same suite (internal/storetest). main wires it in.
type Store interface {
	session.Store
	// Session reads a session's row; a missing one is ENOTFOUND.
	Session(ctx context.Context, id string) (*db.Session, error)
	// Sessions lists sessions newest first, at most limit (0: all), with
	// their summary columns only: not their scenarios.
	Sessions(ctx context.Context, limit int) ([]db.Session, error)
	// SessionsWhere lists those of a status, of an origin, at most a
	// number of them, as Sessions does.
	SessionsWhere(ctx context.Context, f db.SessionFilter) ([]db.Session, error)
	// Read calls fn with a reader of one session, one moment of it.
	Read(ctx context.Context, id string, fn func(db.Reader) error) error
	// Trace reads a whole session as its trace.
	Trace(ctx context.Context, id string) (*trace.Trace, error)
	// EventsPage reads a page of a session's log after a seq, with what
	// each event introduced: the live stream's backlog.
	EventsPage(ctx context.Context, sessionID string, after int64, limit int) ([]db.LoggedEvent, error)

	Team(ctx context.Context, id string) (*db.Team, error)
	Teams(ctx context.Context) ([]db.Team, error)
	CreateTeam(ctx context.Context, t *db.Team) error
	UpdateTeam(ctx context.Context, t *db.Team) error
	DeleteTeam(ctx context.Context, id string) error

	// Runs are sessions started together (a lesson's variants, both
	// modes, a team's run); a cloned team remembers its source.
	CreateRun(ctx context.Context, r *db.Run) error
	Runs(ctx context.Context, f db.RunFilter) ([]db.Run, error)
	Run(ctx context.Context, id string) (*db.Run, error)
	CreateTeamFrom(ctx context.Context, t *db.Team, source string) error
	TeamSource(ctx context.Context, id string) (string, error)
	TeamNames(ctx context.Context) (map[string]bool, error)

	// PushedSeq and SetPushedSeq remember what of a session went to which
	// OTLP endpoint.
	PushedSeq(ctx context.Context, sessionID, endpoint string) (int64, error)
	SetPushedSeq(ctx context.Context, sessionID, endpoint string, seq int64) error

	// SessionCounts counts the sessions by status; Ping checks that the
	// store answers.
	SessionCounts(ctx context.Context) (map[string]int, error)
	Ping(ctx context.Context) error
}

// describer is a store that can say what is wrong with itself (a damaged
// or read-only file) in words for the person running the studio.
type describer interface {
	Describe(err error) error
}

var _ Store = (*db.DB)(nil)
