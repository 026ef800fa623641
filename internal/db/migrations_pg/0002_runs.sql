-- Runs: sessions started together, kept as such (SQLite's 0009_runs):
-- a lesson's variants, a scenario in both modes, a team's run; and what a
-- team was cloned from.

CREATE TABLE runs (
    id         TEXT PRIMARY KEY,
    kind       TEXT NOT NULL CHECK (kind IN ('lesson', 'modes', 'team')),
    lesson     TEXT NOT NULL DEFAULT '',
    mode       TEXT NOT NULL DEFAULT '',
    team_id    TEXT NOT NULL DEFAULT '',
    source     TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL
);
CREATE INDEX runs_lesson ON runs (lesson, created_at DESC) WHERE lesson <> '';
CREATE INDEX runs_team ON runs (team_id, created_at DESC) WHERE team_id <> '';
CREATE INDEX runs_created ON runs (created_at DESC);

CREATE TABLE run_sessions (
    run_id     TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    position   BIGINT NOT NULL,
    variant    TEXT NOT NULL,
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    PRIMARY KEY (run_id, position)
);
CREATE INDEX run_sessions_session ON run_sessions (session_id);

ALTER TABLE teams ADD COLUMN source TEXT NOT NULL DEFAULT '';
