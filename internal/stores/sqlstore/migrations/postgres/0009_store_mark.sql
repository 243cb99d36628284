-- Version 9 (PostgreSQL): the durable high-water mark (mark.go).
-- store_mark holds the database's random identity; replica_marks one
-- row per replica, whose seq the replica advances after its writes and
-- copies into its own mark file; data_loss_accepted records every open
-- that accepted a loss (MarkOptions.AcceptDataLoss).
CREATE TABLE store_mark (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    identity BYTEA   NOT NULL
);
INSERT INTO store_mark (id, identity) VALUES (1, uuid_send(gen_random_uuid()));
CREATE TABLE replica_marks (
    replica TEXT        PRIMARY KEY,
    seq     BIGINT      NOT NULL,
    at      TIMESTAMPTZ NOT NULL
);
CREATE TABLE data_loss_accepted (
    at      TIMESTAMPTZ NOT NULL,
    replica TEXT        NOT NULL,
    kind    TEXT        NOT NULL,
    detail  TEXT        NOT NULL
);
