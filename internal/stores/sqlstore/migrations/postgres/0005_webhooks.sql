-- Version 5 (PostgreSQL): webhook deliveries (DESIGN §10, issue 17). A
-- row is written with its request, in the same transaction, when the
-- request names a callbackUrl; it is due once the request has ended and
-- next_at has passed, leased by pushing next_at forward (FOR UPDATE SKIP
-- LOCKED across replicas), and deleted when the delivery succeeded or was
-- given up. Deleting the request deletes it.
CREATE TABLE webhooks (
    request_id text        COLLATE "C" NOT NULL PRIMARY KEY REFERENCES requests (id) ON DELETE CASCADE,
    url        text        NOT NULL,
    attempts   integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_at    timestamptz NOT NULL,
    last_error text        NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL
);

CREATE INDEX webhooks_next_at ON webhooks (next_at);
