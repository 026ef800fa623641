-- The log is the one truth, and each thing it says is stored once
-- (issue 16; docs/store.md):
--
-- * log holds every event of every session, in blocks of consecutive
--   events, each a few bytes (logcodec.go). An event that restates a row
--   refers to it and is read back from it: message.added and model.* their
--   message and call, tool.* the assistant message that asked for the
--   call, agent.started its agent, files.changed and session.started their
--   files' contents. Others keep their data as the trace writes it.
-- * messages and model calls no longer repeat the seq and time their
--   events hold (but a call's start, which its timeline row shows); an id
--   that is its place ("main.12", "main.c5") is not stored.
-- * a file's content is stored once per version (contents); a version that
--   extends the one before it (a history file that grows) only as what it
--   adds, and what summarization wrote there as the messages it folded.
--   files says which version each agent's file is at.
-- * a session's scenario has a table of its own: the sessions list reads
--   only summary columns, never past a megabyte of scenario.
--
-- The events of sessions stored before are moved into blocks by
-- migrateLog (migrate.go), which then drops the *_v6 tables; their data
-- stays as the trace writes it.

-- The scenario as run: 'j' + JSON, or 'z' + gzipped JSON.
CREATE TABLE session_scenarios (
    sid      INTEGER PRIMARY KEY REFERENCES sessions (sid) ON DELETE CASCADE,
    scenario BLOB NOT NULL
);
INSERT INTO session_scenarios (sid, scenario) SELECT sid, scenario FROM sessions;
ALTER TABLE sessions DROP COLUMN scenario;

-- (Its model and price columns are 0007_costs'.)
-- n numbers a session's agents in the order they started: the log names
-- an agent by it.
ALTER TABLE agents ADD COLUMN n INTEGER NOT NULL DEFAULT 0;
UPDATE agents SET n = (SELECT count(*) FROM agents b WHERE b.sid = agents.sid AND b.seq < agents.seq);
ALTER TABLE agents ADD COLUMN max_steps INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agents ADD COLUMN endpoint TEXT NOT NULL DEFAULT '';

-- A block of a log: first is the seq of its first event, the others
-- following it one by one; prev_at is the time its first event's is after
-- (the block before's last), last_at its last event's, both in ns after the
-- session's start. A block is written once, full, at the end of the table
-- (a rowid table: its pages fill); a log's last block, still filling, is
-- its row of log_tail, which every append rewrites.
CREATE TABLE log (
    sid     INTEGER NOT NULL REFERENCES sessions (sid) ON DELETE CASCADE,
    first   INTEGER NOT NULL,
    count   INTEGER NOT NULL,
    prev_at INTEGER NOT NULL,
    last_at INTEGER NOT NULL,
    events  BLOB NOT NULL
);
CREATE UNIQUE INDEX log_blocks ON log (sid, first);
CREATE TABLE log_tail (
    sid     INTEGER PRIMARY KEY REFERENCES sessions (sid) ON DELETE CASCADE,
    first   INTEGER NOT NULL,
    count   INTEGER NOT NULL,
    prev_at INTEGER NOT NULL,
    last_at INTEGER NOT NULL,
    events  BLOB NOT NULL
);

ALTER TABLE events RENAME TO events_v6;
ALTER TABLE messages RENAME TO messages_v6;
ALTER TABLE model_calls RENAME TO model_calls_v6;

-- A message: id is NULL when it is agent_id || '.' || idx; role is 1 for
-- user, 2 assistant, 3 tool (codes.go), else its name (no declared type:
-- stored as given); tool_calls is JSON, NULL when none.
CREATE TABLE messages (
    sid          INTEGER NOT NULL REFERENCES sessions (sid) ON DELETE CASCADE,
    agent_id     TEXT NOT NULL,
    idx          INTEGER NOT NULL,
    id           TEXT,
    role         NOT NULL,
    content      TEXT NOT NULL,
    tool_calls   TEXT,
    tool_call_id TEXT,
    is_error     INTEGER NOT NULL DEFAULT 0,
    tokens       INTEGER NOT NULL,
    kind         TEXT NOT NULL DEFAULT '',
    reasoning    TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (sid, agent_id, idx)
) WITHOUT ROWID;
INSERT INTO messages (sid, agent_id, idx, id, role, content, tool_calls, tool_call_id, is_error, tokens, kind, reasoning)
SELECT sid, agent_id, idx, CASE WHEN id = agent_id || '.' || idx THEN NULL ELSE id END,
    CASE role WHEN 'user' THEN 1 WHEN 'assistant' THEN 2 WHEN 'tool' THEN 3 ELSE role END,
    content, tool_calls, tool_call_id, is_error, tokens, kind, reasoning
FROM messages_v6;
CREATE INDEX messages_id ON messages (sid, id) WHERE id IS NOT NULL;

-- A model call: idx is its place among its agent's calls, n its step (its
-- place among the session's, from 1), seq and at its model.started's (at
-- in ns after the session's start); id is NULL when it is agent_id || '.c'
-- || idx; purpose is 1 for turn, 2 summary, else its name; context is
-- [[agent_id, from, to], …]; output is its answer's index in its agent's
-- list when its id is the one that gives, else the id (neither typed:
-- stored as given).
CREATE TABLE model_calls (
    sid              INTEGER NOT NULL REFERENCES sessions (sid) ON DELETE CASCADE,
    agent_id         TEXT NOT NULL,
    idx              INTEGER NOT NULL,
    n                INTEGER NOT NULL,
    seq              INTEGER NOT NULL,
    at               INTEGER NOT NULL,
    id               TEXT,
    purpose          NOT NULL,
    context          TEXT NOT NULL,
    system_tokens    INTEGER NOT NULL,
    tool_tokens      INTEGER NOT NULL,
    message_tokens   INTEGER NOT NULL,
    inherited_tokens INTEGER NOT NULL,
    input_tokens     INTEGER NOT NULL,
    output,
    duration_ms      INTEGER NOT NULL DEFAULT 0,
    error            TEXT NOT NULL DEFAULT '',
    usage            TEXT,
    cached_prefix_tokens INTEGER NOT NULL DEFAULT 0,
    cost             TEXT,
    PRIMARY KEY (sid, agent_id, idx)
) WITHOUT ROWID;
INSERT INTO model_calls (sid, agent_id, idx, n, seq, at, id, purpose, context, system_tokens, tool_tokens, message_tokens,
    inherited_tokens, input_tokens, output, duration_ms, error, usage, cached_prefix_tokens, cost)
SELECT c.sid, c.agent_id, c.idx, row_number() OVER (PARTITION BY c.sid ORDER BY c.seq), c.seq, c.at - s.created_at,
    CASE WHEN c.id = c.agent_id || '.c' || c.idx THEN NULL ELSE c.id END,
    CASE c.purpose WHEN 'turn' THEN 1 WHEN 'summary' THEN 2 ELSE c.purpose END,
    c.context, c.system_tokens, c.tool_tokens, c.message_tokens, c.inherited_tokens, c.input_tokens,
    CASE WHEN c.output_message_id GLOB c.agent_id || '.[0-9]*'
        AND c.output_message_id = c.agent_id || '.' || CAST(substr(c.output_message_id, length(c.agent_id) + 2) AS INTEGER)
        THEN CAST(substr(c.output_message_id, length(c.agent_id) + 2) AS INTEGER) ELSE c.output_message_id END,
    c.duration_ms, c.error, c.usage, c.cached_prefix_tokens, c.cost
FROM model_calls_v6 c JOIN sessions s ON s.sid = c.sid;
CREATE INDEX model_calls_step ON model_calls (sid, n);
CREATE INDEX model_calls_id ON model_calls (sid, id) WHERE id IS NOT NULL;

-- A file's content, one row per version (n, from 1 per session): base is
-- the version it extends (its text is what follows base's) and depth how
-- many it is on top of; size is its whole length in bytes and sum the first
-- 8 bytes of its SHA-256 (what a new version is compared with; NULL for a
-- small whole one, read back instead). A version a summarization wrote is
-- history, [its number, its agent, the ranges it folded], and no text: it is
-- written again from the messages. A version that is a string argument of
-- the tool call that wrote it (write_file's content) is arg, [agent, message
-- index, call position, key], and no text: it is read from that message.
CREATE TABLE contents (
    sid     INTEGER NOT NULL REFERENCES sessions (sid) ON DELETE CASCADE,
    n       INTEGER NOT NULL,
    base    INTEGER,
    depth   INTEGER NOT NULL DEFAULT 0,
    size    INTEGER NOT NULL,
    sum     BLOB,
    text    TEXT NOT NULL,
    history TEXT,
    arg     TEXT,
    PRIMARY KEY (sid, n)
) WITHOUT ROWID;
INSERT INTO contents (sid, n, base, size, sum, text)
SELECT sid, row_number() OVER (PARTITION BY sid ORDER BY path), NULL, length(CAST(content AS BLOB)), NULL, content FROM files;

-- Each agent's files as its changes left them (a child's: those it
-- changed), each at a version (contents.n); the main agent's are the
-- session's.
CREATE TABLE files_new (
    sid      INTEGER NOT NULL REFERENCES sessions (sid) ON DELETE CASCADE,
    agent_id TEXT NOT NULL,
    path     TEXT NOT NULL,
    content  INTEGER NOT NULL,
    PRIMARY KEY (sid, agent_id, path)
) WITHOUT ROWID;
INSERT INTO files_new (sid, agent_id, path, content)
SELECT sid, 'main', path, row_number() OVER (PARTITION BY sid ORDER BY path) FROM files;
DROP TABLE files;
ALTER TABLE files_new RENAME TO files;
