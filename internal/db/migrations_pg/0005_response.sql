-- What the endpoint said of a model call's answer (SQLite's 0012_response):
-- the trace's JSON, NULL when it said none of it.
ALTER TABLE model_calls ADD COLUMN response TEXT;
