-- Version 5 (SQLite): webhook deliveries (DESIGN §10, issue 17). A row is
-- written with its request, in the same transaction, when the request
-- names a callbackUrl; it is due once the request has ended and next_at
-- has passed, leased by pushing next_at forward, and deleted when the
-- delivery succeeded or was given up. Deleting the request deletes it.
CREATE TABLE webhooks (
    request_id TEXT    NOT NULL PRIMARY KEY REFERENCES requests (id) ON DELETE CASCADE,
    url        TEXT    NOT NULL,
    attempts   INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_at    INTEGER NOT NULL,
    last_error TEXT    NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL
) STRICT;

CREATE INDEX webhooks_next_at ON webhooks (next_at);
