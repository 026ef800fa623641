-- What an evicted message moved to a file (SQLite's 0010_evicted): the
-- trace's JSON, NULL for every other message.
ALTER TABLE messages ADD COLUMN evicted TEXT;
