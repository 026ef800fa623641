-- A message whose text was too big for the model and was moved to a file
-- (docs/delegation.md §12) keeps the pointer as its content and says what
-- moved here, as the trace's JSON: the file, the original's characters and
-- tokens. NULL for every other message.
ALTER TABLE messages ADD COLUMN evicted TEXT;
