-- ACDS store schema, version 1 (PostgreSQL).
-- Objects are created in the first schema of the connection's search_path.

CREATE TABLE sessions (
    pseudonym  text        NOT NULL PRIMARY KEY,
    token_hash bytea       NOT NULL UNIQUE CHECK (length(token_hash) = 32),
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);

CREATE INDEX sessions_expires_at ON sessions (expires_at);

-- A passphrase outlives the sessions of its pseudonym: recovery issues a
-- new session after the old one expired.
CREATE TABLE passphrases (
    pseudonym    text        NOT NULL PRIMARY KEY,
    encoded_hash text        NOT NULL,
    updated_at   timestamptz NOT NULL
);

CREATE TABLE requests (
    id           text        COLLATE "C" NOT NULL PRIMARY KEY,
    owner        text        COLLATE "C" NOT NULL,
    kind         text        NOT NULL CHECK (kind IN ('process', 'fetch-and-attest')),
    status       text        NOT NULL CHECK (status IN ('processing', 'completed', 'failed')),
    input        bytea,
    sealed       bytea,
    result       bytea,
    error        bytea,
    attempts     integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    lease_owner  text        NOT NULL DEFAULT '',
    lease_until  timestamptz,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL,
    completed_at timestamptz
);

-- Listing: an owner's requests newest first, keyset-paginated.
CREATE INDEX requests_owner_created ON requests (owner, created_at DESC, id DESC);
-- Claiming: the oldest request still processing.
CREATE INDEX requests_claimable ON requests (created_at, id) WHERE status = 'processing';
-- Erasing sealed credentials past their TTL.
CREATE INDEX requests_sealed ON requests (created_at) WHERE sealed IS NOT NULL;
