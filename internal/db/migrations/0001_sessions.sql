-- A session is a log of events (design.md). Each message and model call is
-- stored once, with the seq and time of the event that introduced it: the
-- log's message.added, model.started and model.finished events are read
-- back from those rows, and the events table holds every other event.
-- Child tables refer to their session by its integer key (sid), not its
-- text id, to keep rows small.

CREATE TABLE sessions (
    sid          INTEGER PRIMARY KEY,
    id           TEXT NOT NULL UNIQUE,
    name         TEXT NOT NULL,
    title        TEXT NOT NULL DEFAULT '',
    prompt       TEXT NOT NULL DEFAULT '',
    status       TEXT NOT NULL CHECK (status IN ('running', 'done', 'failed', 'interrupted')),
    error        TEXT NOT NULL DEFAULT '',
    tokenizer    TEXT NOT NULL DEFAULT '',
    scenario     BLOB NOT NULL,            -- the scenario exactly as run: 'j' + JSON, or 'z' + gzipped JSON
    created_at   INTEGER NOT NULL,         -- unix nanoseconds
    finished_at  INTEGER,
    last_seq     INTEGER NOT NULL DEFAULT 0,
    agents       INTEGER NOT NULL DEFAULT 0,
    model_calls  INTEGER NOT NULL DEFAULT 0,
    input_tokens INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX sessions_created ON sessions (created_at DESC);

CREATE TABLE events (
    sid      INTEGER NOT NULL REFERENCES sessions (sid) ON DELETE CASCADE,
    seq      INTEGER NOT NULL,
    type     TEXT NOT NULL,
    agent_id TEXT,
    at       INTEGER NOT NULL,
    data     TEXT NOT NULL,               -- as in the trace
    PRIMARY KEY (sid, seq)
) WITHOUT ROWID;

CREATE TABLE agents (
    sid           INTEGER NOT NULL REFERENCES sessions (sid) ON DELETE CASCADE,
    id            TEXT NOT NULL,
    seq           INTEGER NOT NULL,       -- of its agent.started: the tree's order
    name          TEXT NOT NULL,
    parent_id     TEXT,
    mode          TEXT,
    task_call_id  TEXT,
    status        TEXT NOT NULL,
    error         TEXT NOT NULL DEFAULT '',
    invocation    INTEGER NOT NULL DEFAULT 0,
    system_prompt TEXT NOT NULL DEFAULT '',
    system_tokens INTEGER NOT NULL DEFAULT 0,
    tools         TEXT NOT NULL DEFAULT '[]', -- [{name, tokens}]: every call of the agent receives these
    steps         INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (sid, id)
) WITHOUT ROWID;

-- An agent's message list is its rows in idx order.
CREATE TABLE messages (
    sid          INTEGER NOT NULL REFERENCES sessions (sid) ON DELETE CASCADE,
    agent_id     TEXT NOT NULL,
    idx          INTEGER NOT NULL,
    seq          INTEGER NOT NULL,        -- of its message.added
    at           INTEGER NOT NULL,
    id           TEXT NOT NULL,
    role         TEXT NOT NULL,
    content      TEXT NOT NULL,
    tool_calls   TEXT,                    -- JSON, NULL when none
    tool_call_id TEXT,
    is_error     INTEGER NOT NULL DEFAULT 0,
    tokens       INTEGER NOT NULL,
    kind         TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (sid, agent_id, idx)
) WITHOUT ROWID;
CREATE INDEX messages_seq ON messages (sid, seq);

-- A model call refers to the messages it received as ranges of message
-- lists (context), never one row per message per call. Its system prompt
-- and tools are its agent's.
CREATE TABLE model_calls (
    sid               INTEGER NOT NULL REFERENCES sessions (sid) ON DELETE CASCADE,
    id                TEXT NOT NULL,
    seq               INTEGER NOT NULL,   -- of its model.started
    at                INTEGER NOT NULL,
    agent_id          TEXT NOT NULL,
    idx               INTEGER NOT NULL,
    purpose           TEXT NOT NULL,
    context           TEXT NOT NULL,      -- [[agent_id, from, to], …]
    system_tokens     INTEGER NOT NULL,
    tool_tokens       INTEGER NOT NULL,
    message_tokens    INTEGER NOT NULL,
    inherited_tokens  INTEGER NOT NULL,
    input_tokens      INTEGER NOT NULL,
    finished_seq      INTEGER,            -- of its model.finished
    finished_at       INTEGER,
    output_message_id TEXT,
    duration_ms       INTEGER NOT NULL DEFAULT 0,
    error             TEXT NOT NULL DEFAULT '',
    usage             TEXT,
    PRIMARY KEY (sid, id)
) WITHOUT ROWID;
CREATE INDEX model_calls_seq ON model_calls (sid, seq);

-- The main agent's files, as of the newest event.
CREATE TABLE files (
    sid     INTEGER NOT NULL REFERENCES sessions (sid) ON DELETE CASCADE,
    path    TEXT NOT NULL,
    content TEXT NOT NULL,
    PRIMARY KEY (sid, path)
) WITHOUT ROWID;
