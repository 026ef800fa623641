-- The economics of a delegation (issue 22): each model call's cached prefix
-- (the tokens of its input an earlier request of the session began with
-- too) and what it cost, as JSON ({input, cached_input, output, total,
-- basis}, NULL when its agent has no price); each agent's model and price
-- (JSON {input, cached_input, output, model, source}, NULL when none).
ALTER TABLE model_calls ADD COLUMN cached_prefix_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE model_calls ADD COLUMN cost TEXT;
ALTER TABLE agents ADD COLUMN model TEXT NOT NULL DEFAULT '';
ALTER TABLE agents ADD COLUMN price TEXT;
