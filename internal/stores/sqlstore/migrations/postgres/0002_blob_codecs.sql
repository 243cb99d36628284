-- Version 2 (PostgreSQL): nothing to change. The SQLite backend compresses
-- inputs and results itself at this version; PostgreSQL already compresses
-- large bytea values (TOAST), so its columns keep the bytes as given.
COMMENT ON COLUMN requests.input IS 'request body as accepted (JSON); compressed by TOAST';
