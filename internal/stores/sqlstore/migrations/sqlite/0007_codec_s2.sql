-- Version 7 (SQLite): inputs and results may also be stored S2-compressed
-- (codec 2, github.com/klauspost/compress/s2 block format), which new
-- writes use: on FHIR JSON it compresses about five times faster than
-- DEFLATE level 1, on the accept path of every request, and a Synthea
-- bundle comes out smaller (48 KB against 71 KB of 859 KB). Values stored
-- before stay DEFLATE (1) or as given (0) and read as before.
--
-- SQLite cannot change a CHECK constraint in place, so the table is
-- rebuilt (https://www.sqlite.org/lang_altertable.html, section 7) inside
-- the migration's transaction. Foreign keys are on and cannot be turned
-- off within a transaction: dropping requests would delete every webhook
-- row (ON DELETE CASCADE), so those are kept aside in a table of the main
-- database (secure_delete zeroes it when it is dropped) and put back.
CREATE TABLE webhooks_v7 AS SELECT * FROM webhooks;
DROP TABLE webhooks;

CREATE TABLE requests_v7 (
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
    completed_at INTEGER,
    input_codec  INTEGER NOT NULL DEFAULT 0 CHECK (input_codec IN (0, 1, 2)),
    result_codec INTEGER NOT NULL DEFAULT 0 CHECK (result_codec IN (0, 1, 2)),
    erased_at    INTEGER,
    affinity     TEXT    NOT NULL DEFAULT ''
) STRICT;
INSERT INTO requests_v7 (id, owner, kind, status, input, sealed, result, error, attempts, lease_owner, lease_until,
                         created_at, updated_at, completed_at, input_codec, result_codec, erased_at, affinity)
    SELECT id, owner, kind, status, input, sealed, result, error, attempts, lease_owner, lease_until,
           created_at, updated_at, completed_at, input_codec, result_codec, erased_at, affinity
    FROM requests;
DROP TABLE requests;
ALTER TABLE requests_v7 RENAME TO requests;

-- Listing: an owner's requests newest first, keyset-paginated.
CREATE INDEX requests_owner_created ON requests (owner, created_at DESC, id DESC);
-- Claiming: the oldest request still processing.
CREATE INDEX requests_claimable ON requests (created_at, id) WHERE status = 'processing';
-- Erasing sealed credentials past their TTL.
CREATE INDEX requests_sealed ON requests (created_at) WHERE sealed IS NOT NULL;
-- Retention: the ended, not yet erased requests.
CREATE INDEX requests_retained ON requests (completed_at) WHERE erased_at IS NULL AND completed_at IS NOT NULL;

CREATE TABLE webhooks (
    request_id TEXT    NOT NULL PRIMARY KEY REFERENCES requests (id) ON DELETE CASCADE,
    url        TEXT    NOT NULL,
    attempts   INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_at    INTEGER NOT NULL,
    last_error TEXT    NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX webhooks_next_at ON webhooks (next_at);
INSERT INTO webhooks (request_id, url, attempts, next_at, last_error, created_at)
    SELECT request_id, url, attempts, next_at, last_error, created_at FROM webhooks_v7;
DROP TABLE webhooks_v7;
