-- Version 7 (PostgreSQL): nothing to change. The SQLite backend stores new
-- inputs and results S2-compressed at this version; PostgreSQL compresses
-- large bytea values itself (TOAST), so its columns keep the bytes as given.
COMMENT ON COLUMN requests.result IS 'the output as stored (JSON); compressed by TOAST';
