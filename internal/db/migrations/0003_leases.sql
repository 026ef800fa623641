-- A running session belongs to the process running it, which holds a lease
-- on it and renews it while it runs. Recovery (after a crash or a kill)
-- ends only the sessions whose lease has run out, never one that another
-- live process is still running and recording.

ALTER TABLE sessions ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN lease_until INTEGER NOT NULL DEFAULT 0; -- unix nanoseconds; 0: none
CREATE INDEX sessions_running ON sessions (status, lease_until) WHERE status = 'running';
