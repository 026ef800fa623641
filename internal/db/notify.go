package db

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgxlisten"
)

// Listen tells grown, until ctx ends, of every session whose log another
// writer of the store (another replica, or this one) has grown, with its
// new last seq, as each append commits (LogChannel). Notifications are not
// kept while no one listens: after connecting again (the database
// restarted, the network failed), it calls reconnected, and the listener
// reads what it may have missed from the store. It returns when ctx ends;
// a SQLite store has no other writer to hear from, and says so.
func (db *DB) Listen(ctx context.Context, grown func(id string, seq int64), reconnected func()) error {
	if !db.pg {
		return errors.New("listen: only a PostgreSQL store has other replicas to hear from")
	}
	cfg, err := pgx.ParseConfig(db.dsn)
	if err != nil {
		return err
	}
	l := &pgxlisten.Listener{
		Connect:        func(ctx context.Context) (*pgx.Conn, error) { return pgx.ConnectConfig(ctx, cfg) },
		ReconnectDelay: time.Second,
	}
	l.Handle(LogChannel, logHandler{grown: grown, reconnected: reconnected})
	err = l.Listen(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

type logHandler struct {
	grown       func(string, int64)
	reconnected func()
}

func (h logHandler) HandleNotification(_ context.Context, n *pgconn.Notification, _ *pgx.Conn) error {
	seq, id, ok := strings.Cut(n.Payload, " ")
	last, err := strconv.ParseInt(seq, 10, 64)
	if !ok || err != nil {
		return fmt.Errorf("a %s notification that is not \"<seq> <session id>\": %q", LogChannel, n.Payload)
	}
	h.grown(id, last)
	return nil
}

// HandleBacklog runs once listening has begun on each connection, so
// nothing appended since the last notification heard is left unread.
func (h logHandler) HandleBacklog(context.Context, string, *pgx.Conn) error {
	if h.reconnected != nil {
		h.reconnected()
	}
	return nil
}
