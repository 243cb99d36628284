-- Version 6 (SQLite): the trust anchors of the replicas sharing the
-- database (store.TrustRegistry), public material only, one per replica.
CREATE TABLE trust_anchors (
    replica    TEXT PRIMARY KEY,
    anchor     BLOB NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;
