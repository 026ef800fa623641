package db

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgxlisten"
)

// What the replicas of a PostgreSQL store tell each other, through it.

// StopChannel is the channel a replica NOTIFYs with a session's id to have
// the replica running it stop it (RequestStop).
const StopChannel = "studio_stop"

// Listener is what a replica is told by the others (Listen).
type Listener struct {
	// Grown: a session's log grew, to seq (LogChannel).
	Grown func(id string, seq int64)
	// Stop: someone asked for a session to stop (StopChannel).
	Stop func(id string)
	// Reconnected: the connection was lost and made again; notifications
	// of the meantime are lost, and what they said is read from the store.
	Reconnected func()
}

// Listen tells l, until ctx ends, what the store's writers (other
// replicas, and this one) say as they commit: each session whose log grew,
// with its new last seq, and each stop asked for. Notifications are not
// kept while no one listens: after connecting again (the database
// restarted, the network failed), it calls l.Reconnected. It returns when
// ctx ends; a SQLite store has no other replica to hear from, and says so.
func (db *DB) Listen(ctx context.Context, l Listener) error {
	if !db.pg {
		return errors.New("listen: only a PostgreSQL store has other replicas to hear from")
	}
	cfg, err := pgx.ParseConfig(db.dsn)
	if err != nil {
		return err
	}
	pl := &pgxlisten.Listener{
		Connect:        func(ctx context.Context) (*pgx.Conn, error) { return pgx.ConnectConfig(ctx, cfg) },
		ReconnectDelay: time.Second,
	}
	pl.Handle(LogChannel, logHandler{l})
	pl.Handle(StopChannel, pgxlisten.HandlerFunc(func(_ context.Context, n *pgconn.Notification, _ *pgx.Conn) error {
		if l.Stop != nil {
			l.Stop(n.Payload)
		}
		return nil
	}))
	err = pl.Listen(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

type logHandler struct{ l Listener }

func (h logHandler) HandleNotification(_ context.Context, n *pgconn.Notification, _ *pgx.Conn) error {
	seq, id, ok := strings.Cut(n.Payload, " ")
	last, err := strconv.ParseInt(seq, 10, 64)
	if !ok || err != nil {
		return fmt.Errorf("a %s notification that is not \"<seq> <session id>\": %q", LogChannel, n.Payload)
	}
	if h.l.Grown != nil {
		h.l.Grown(id, last)
	}
	return nil
}

// HandleBacklog runs once listening has begun on each connection, so
// nothing appended since the last notification heard is left unread.
func (h logHandler) HandleBacklog(context.Context, string, *pgx.Conn) error {
	if h.l.Reconnected != nil {
		h.l.Reconnected()
	}
	return nil
}

// RequestStop asks the replica running a session to stop it.
func (db *DB) RequestStop(ctx context.Context, id string) error {
	if !db.pg {
		return errors.New("stop: a SQLite store has no other replica to ask")
	}
	_, err := db.w.ExecContext(ctx, `SELECT pg_notify(?, ?)`, StopChannel, id)
	return err
}

// SharedKey is a secret every replica of a PostgreSQL store shares, made by
// the first that asks: the key of their forms' tokens, so that a form one
// replica drew is taken by another.
func (db *DB) SharedKey(ctx context.Context, name string) ([]byte, error) {
	if !db.pg {
		return nil, errors.New("a SQLite store keeps no shared keys")
	}
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	var out []byte
	err := db.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO secrets (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`, name, k); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT value FROM secrets WHERE name = ?`, name).Scan(&out)
	})
	if err != nil {
		return nil, fmt.Errorf("read the replicas' shared key %s: %w", name, err)
	}
	return out, nil
}
