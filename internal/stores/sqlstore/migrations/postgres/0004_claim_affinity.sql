-- Version 4 (PostgreSQL): a request may be reserved for the workers of one
-- affinity (the replica whose enclave sealed its credentials); '' is none.
ALTER TABLE requests ADD COLUMN affinity TEXT NOT NULL DEFAULT '';
