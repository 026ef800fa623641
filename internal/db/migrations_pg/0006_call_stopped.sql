-- Why a stop from outside cut a model call (SQLite's 0013_call_stopped):
-- a delegation.Stop* code, NULL when none did.
ALTER TABLE model_calls ADD COLUMN stopped_by TEXT;
