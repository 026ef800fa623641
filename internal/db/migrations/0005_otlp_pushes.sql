-- What was pushed where: for each session and OTLP endpoint, the seq of the
-- log through which every finished span has been sent, so that a later push
-- (a running session's, then its end) sends the rest and never a span twice.
-- IF NOT EXISTS: two processes opening a new file at once may both apply it.

CREATE TABLE IF NOT EXISTS otlp_pushes (
    sid      INTEGER NOT NULL REFERENCES sessions (sid) ON DELETE CASCADE,
    endpoint TEXT NOT NULL,                -- the URL, without credentials
    seq      INTEGER NOT NULL,
    at       INTEGER NOT NULL,             -- unix nanoseconds
    PRIMARY KEY (sid, endpoint)
) WITHOUT ROWID;
