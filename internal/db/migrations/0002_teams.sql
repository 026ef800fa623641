-- A team is a scenario document the team editor keeps: the main agent, its
-- subagents and, optionally, a prompt and a script that make it runnable.
-- The document is stored whole, as the scenario format writes it, so export
-- is a read and import is one insert; name and title are copied out of it
-- for the list. IF NOT EXISTS: two processes opening a new file at once may
-- both apply it.

CREATE TABLE IF NOT EXISTS teams (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    title      TEXT NOT NULL DEFAULT '',
    scenario   TEXT NOT NULL CHECK (json_valid(scenario)), -- the scenario document (formats.md §1)
    created_at INTEGER NOT NULL,                            -- unix nanoseconds
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS teams_created ON teams (created_at DESC);
