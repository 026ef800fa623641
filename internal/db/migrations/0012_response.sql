-- What the endpoint said of a model call's answer (issue 35): the
-- response's id, the model that answered and its finish reason, as the
-- trace's JSON ({id, model, finish_reason}); NULL when it said none of it
-- (the scripted model, calls stored before).
ALTER TABLE model_calls ADD COLUMN response TEXT;
