-- A run is sessions started together, kept as such (issue 13): a lesson's
-- variants (kind 'lesson', mode 'ours' or 'deepagents'), a scenario run with
-- every subagent isolated and again with every one a fork ('modes'), or a
-- team's run ('team'). Its sessions are named by id, each with the variant
-- it plays; deleting a session drops it from its run. A team remembers what
-- it was cloned from ('lesson:NAME' or 'session:ID'), so its page can offer
-- to compare with it. IF NOT EXISTS: two processes opening a file at once
-- may both apply it.

CREATE TABLE IF NOT EXISTS runs (
    id         TEXT PRIMARY KEY,
    kind       TEXT NOT NULL CHECK (kind IN ('lesson', 'modes', 'team')),
    lesson     TEXT NOT NULL DEFAULT '',   -- the lesson it ran, for 'lesson' and a lesson's 'modes'
    mode       TEXT NOT NULL DEFAULT '',   -- a lesson run's: 'ours' or 'deepagents'
    team_id    TEXT NOT NULL DEFAULT '',   -- the team it ran, for 'team'
    source     TEXT NOT NULL DEFAULT '',   -- a 'modes' run of a session: its id
    created_at INTEGER NOT NULL            -- unix nanoseconds
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS runs_lesson ON runs (lesson, created_at DESC) WHERE lesson <> '';
CREATE INDEX IF NOT EXISTS runs_team ON runs (team_id, created_at DESC) WHERE team_id <> '';
CREATE INDEX IF NOT EXISTS runs_created ON runs (created_at DESC);

CREATE TABLE IF NOT EXISTS run_sessions (
    run_id     TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    position   INTEGER NOT NULL,           -- the variants' order
    variant    TEXT NOT NULL,
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    PRIMARY KEY (run_id, position)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS run_sessions_session ON run_sessions (session_id);

ALTER TABLE teams ADD COLUMN source TEXT NOT NULL DEFAULT '';
