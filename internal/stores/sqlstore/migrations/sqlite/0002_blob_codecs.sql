-- Version 2 (SQLite): inputs and results may be stored deflate-compressed.
-- 0 = stored as given, 1 = raw DEFLATE (RFC 1951). Compression happens in
-- the caller's goroutine, before the single writer, so that each group
-- commit writes and syncs fewer bytes.
ALTER TABLE requests ADD COLUMN input_codec  INTEGER NOT NULL DEFAULT 0 CHECK (input_codec IN (0, 1));
ALTER TABLE requests ADD COLUMN result_codec INTEGER NOT NULL DEFAULT 0 CHECK (result_codec IN (0, 1));
