-- Version 9 (SQLite): the durable high-water mark (mark.go). store_mark
-- holds the database's random identity and the sequence number and time
-- (Unix microseconds) of its last commit, advanced by every write
-- transaction; marked becomes 1 once a mark file was written for this
-- database. data_loss_accepted records every open that accepted a loss
-- (MarkOptions.AcceptDataLoss).
CREATE TABLE store_mark (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    identity BLOB    NOT NULL,
    seq      INTEGER NOT NULL,
    at       INTEGER NOT NULL,
    marked   INTEGER NOT NULL
) STRICT;
INSERT INTO store_mark (id, identity, seq, at, marked) VALUES (1, randomblob(16), 0, 0, 0);
CREATE TABLE data_loss_accepted (
    at     INTEGER NOT NULL,
    kind   TEXT    NOT NULL,
    detail TEXT    NOT NULL
) STRICT;
