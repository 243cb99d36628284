-- Version 8 (PostgreSQL): crash isolation (store.ClaimOptions.Isolate). A
-- request whose lease ran out before its attempt ended becomes a suspect
-- (1) and is retried alone, leased as solo (2); a solo lease that runs
-- out fails the request. 0 for every request so far.
ALTER TABLE requests ADD COLUMN isolation SMALLINT NOT NULL DEFAULT 0 CHECK (isolation IN (0, 1, 2));
