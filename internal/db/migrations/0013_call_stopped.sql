-- Why a stop from outside cut a model call (a delegation.Stop* code:
-- user, shutdown, signal, lapsed, other), so the pages word it in the
-- reader's language; NULL when none did (and for calls stored before).
ALTER TABLE model_calls ADD COLUMN stopped_by TEXT;
