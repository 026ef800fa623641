-- A reasoning model's thinking before an answer (reasoning_content) is its
-- own part of the message: shown apart, never sent back to the model, not
-- counted in tokens. Empty for every other message.
ALTER TABLE messages ADD COLUMN reasoning TEXT NOT NULL DEFAULT '';
