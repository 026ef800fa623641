-- Where each session came from, in its row (SQLite's 0011_origin); the
-- sessions stored before are read from their logs (migrate.go).
ALTER TABLE sessions ADD COLUMN origin TEXT NOT NULL DEFAULT 'engine';
