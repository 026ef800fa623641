package server

import (
	"context"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/replica"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/view"
)

// notifier is a store that other replicas write to (replica.Store), and
// that keeps the key the replicas' forms are signed with.
type notifier interface {
	replica.Store
	Postgres() bool
	SharedKey(ctx context.Context, name string) ([]byte, error)
}

// replicaViewers are this server's live viewers, as a replica.Follower
// publishes to them.
type replicaViewers struct{ s *Server }

func (v replicaViewers) Watching(id string) int { return liveViewers(v.s.hub, id) }

func (v replicaViewers) Stored(id string, seq int64) {
	for _, t := range liveTopics(id) {
		v.s.hub.Stored(t, seq)
	}
}

func (v replicaViewers) PublishStored(id string, events []db.LoggedEvent, ch view.Changes, l *session.Live) {
	v.s.views.PublishStored(id, events, ch, l)
}

// running reports whether a session whose state says status runs: here,
// or, sharing the store with other replicas, on one whose lease on it
// holds. Its page is live then, and may be stopped.
func (s *Server) running(ctx context.Context, id, status string) bool {
	if status != delegation.StatusRunning {
		return false
	}
	if s.runner.Running(id) {
		return true
	}
	if s.replicas == nil {
		return false // left running by a process that stopped
	}
	row, err := s.cfg.DB.Session(ctx, id)
	return err == nil && row.Status == delegation.StatusRunning && !row.Lapsed(s.cfg.DB.Now())
}
