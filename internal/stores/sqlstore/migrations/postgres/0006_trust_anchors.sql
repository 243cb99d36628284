-- Version 6 (PostgreSQL): the trust anchors of the replicas sharing the
-- database (store.TrustRegistry), public material only, one per replica.
CREATE TABLE trust_anchors (
    replica    TEXT PRIMARY KEY,
    anchor     BYTEA NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);
