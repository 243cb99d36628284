-- Version 3 (SQLite): retention. An ended request's input, result and
-- proofs are erased after the operator's retention time; erased_at says
-- when. The partial index finds the ended, not yet erased requests.
ALTER TABLE requests ADD COLUMN erased_at INTEGER;
CREATE INDEX requests_retained ON requests (completed_at) WHERE erased_at IS NULL AND completed_at IS NOT NULL;
-- Revoking every token of a pseudonym.
CREATE INDEX sessions_pseudonym ON sessions (pseudonym);
