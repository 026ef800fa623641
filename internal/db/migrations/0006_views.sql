-- (This was numbered 5, as was 0005_otlp_pushes: a file that had one of
-- them at version 5 would never have had the other. Both make only what is
-- missing, so a file at version 5 applies this one again; and the table of
-- the other is made here too when it is missing.)
CREATE TABLE IF NOT EXISTS otlp_pushes (
    sid      INTEGER NOT NULL REFERENCES sessions (sid) ON DELETE CASCADE,
    endpoint TEXT NOT NULL,
    seq      INTEGER NOT NULL,
    at       INTEGER NOT NULL,
    PRIMARY KEY (sid, endpoint)
) WITHOUT ROWID;

-- The session page reads only the rows it shows (issue 12). It needs:
-- a finished session's page state as its fold left it (internal/view), so
-- a page does not fold the whole log again; and an agent's latest model
-- call at a step (the scrubber). A message is found by its place in its
-- agent's list, which its id names ("main.12"), through the primary key:
-- an index on ids would cost a tenth of the store. IF NOT EXISTS: it was
-- numbered 0005 beside 0005_otlp_pushes for a while, so a file may hold it
-- already.

CREATE TABLE IF NOT EXISTS session_views (
    sid     INTEGER PRIMARY KEY REFERENCES sessions (sid) ON DELETE CASCADE,
    seq     INTEGER NOT NULL,   -- the last seq folded into it
    version INTEGER NOT NULL,   -- of its encoding; another is rebuilt from the log
    state   BLOB NOT NULL       -- JSON
);

CREATE INDEX IF NOT EXISTS model_calls_agent ON model_calls (sid, agent_id, seq);
