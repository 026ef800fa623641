-- Where each session came from (delegation.Origin's kind: engine, otlp,
-- proxy), as its session.started says, in its row so that a list can be
-- filtered by it (studio sessions --origin, GET /api/sessions?origin=).
-- The sessions stored before are read from their logs (migrate.go).
ALTER TABLE sessions ADD COLUMN origin TEXT NOT NULL DEFAULT 'engine';
