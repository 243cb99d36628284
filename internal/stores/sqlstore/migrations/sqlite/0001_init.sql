-- ACDS store schema, version 1 (SQLite).
-- Times are microseconds since the Unix epoch (UTC).

CREATE TABLE sessions (
    pseudonym  TEXT    NOT NULL PRIMARY KEY,
    token_hash BLOB    NOT NULL UNIQUE CHECK (length(token_hash) = 32),
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT;

CREATE INDEX sessions_expires_at ON sessions (expires_at);

-- A passphrase outlives the sessions of its pseudonym: recovery issues a
-- new session after the old one expired.
CREATE TABLE passphrases (
    pseudonym    TEXT    NOT NULL PRIMARY KEY,
    encoded_hash TEXT    NOT NULL,
    updated_at   INTEGER NOT NULL
) STRICT;

CREATE TABLE requests (
    id           TEXT    NOT NULL PRIMARY KEY,
    owner        TEXT    NOT NULL,
    kind         TEXT    NOT NULL CHECK (kind IN ('process', 'fetch-and-attest')),
    status       TEXT    NOT NULL CHECK (status IN ('processing', 'completed', 'failed')),
    input        BLOB,
    sealed       BLOB,
    result       BLOB,
    error        BLOB,
    attempts     INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    lease_owner  TEXT    NOT NULL DEFAULT '',
    lease_until  INTEGER,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    completed_at INTEGER
) STRICT;

-- Listing: an owner's requests newest first, keyset-paginated.
CREATE INDEX requests_owner_created ON requests (owner, created_at DESC, id DESC);
-- Claiming: the oldest request still processing.
CREATE INDEX requests_claimable ON requests (created_at, id) WHERE status = 'processing';
-- Erasing sealed credentials past their TTL.
CREATE INDEX requests_sealed ON requests (created_at) WHERE sealed IS NOT NULL;
