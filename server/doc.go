// Package server is the ACDS API server: an http.Handler for the v1 wire
// contract (package acds) and the workers that process accepted requests.
//
// A Server is a value you construct with New and mount anywhere; it holds
// no global state. Handler serves paths under /v1/ and works under any
// prefix of a parent mux (http.StripPrefix); Location headers keep the
// prefix. Close stops the workers, letting in-flight requests finish.
//
//	srv, err := server.New(server.Config{Store: st, Pipeline: p, Enclave: e, Verifier: v})
//	if err != nil { ... }
//	defer srv.Close(ctx)
//	mux.Handle("/acds/", http.StripPrefix("/acds", srv.Handler()))
//
// # Seams
//
// The server reaches its store (store.Store, an interface an embedder may
// implement), FHIR processing, the enclave, portal fetching and
// verification through small interfaces in the domain packages' own
// types: Pipeline (optionally Checker), Enclave, Fetcher and Verifier.
// FHIRPipeline, AttestationEnclave, Verify and *portal.Fetcher are the
// real ones; package service opens all of them from a data directory. A nil seam is never
// faked: a request that needs it is not accepted but answered 503
// unavailable at once, naming what is missing (POST /v1/process needs
// Pipeline and Enclave; POST /v1/fetch-and-attest also Fetcher; POST
// /v1/verify needs Verifier). The answer has no Retry-After: it lasts as
// long as the configuration does. Which portal URLs and recordIds are accepted is
// the Fetcher's decision (Fetcher.Admit), taken by the rules its fetch
// applies, so a request is never accepted only to fail on one of them.
// Package servertest has fakes for tests.
//
// # Request lifecycle
//
// POST /v1/process and POST /v1/fetch-and-attest validate the body, store
// the request durably (the Store returns only once the row is on disk) and
// only then answer 202 with a Location. Workers claim requests with a
// lease (Config.Lease) and heartbeat every third of it. A worker that dies
// (killed process, panic) stops heartbeating; once its lease expires, the
// request is a suspect: it was in flight when its process died, and may
// be what killed it. Suspects are retried one at a time, each alone in
// its process (in this process or another replica sharing the store); one
// whose solo retry dies too fails with an "internal" problem saying that
// processing could not complete, and the others are not charged for the
// crash. Close with an expired context gives the leases of the attempts it
// stops back to the store. A request claimed Config.MaxAttempts times (3)
// without ending fails with an "internal" problem that says so. Every
// accepted request therefore ends exactly once, completed or failed, and
// one that kills its process is retried once.
//
// Portal credentials are sealed by the enclave, bound to the request id,
// before they are stored, erased when the fetch ends and after
// Config.CredentialTTL, and never logged or returned.
//
// # Authentication and limits
//
// POST /v1/auth/anon issues a pseudonym and a bearer token ("acds_" + 43
// base64url characters, 256 random bits). The server stores only the
// token's SHA-256 and compares in constant time; tokens expire after
// Config.TokenLifetime (24 h). An optional passphrase (≥ 12 characters,
// stored as Argon2id) lets POST /v1/auth/recover issue a new token for the
// pseudonym. A token sees only its pseudonym's requests; anything else is
// 404. Bodies are decoded strictly (unknown fields, wrong types and
// trailing data are 400 invalid-request naming the field), must be
// application/json (415), and are limited (413) without being read whole.
// Each token has a rate limit, and each client address one limit on
// /v1/auth/* and another, separate one on /v1/verify (Config.AuthRateLimit,
// Config.VerifyRateLimit); all answer 429 with Retry-After. An address
// that presents more than FailedTokenBurst unknown or expired tokens is
// held to Config.FailedTokenLimit of them per second: past it a token the
// server has not cached answers 429 without a store lookup, so guessing
// tokens costs the store nothing. When the Store can count the requests
// still processing (a Store that implements store.QueueStatter, as the SQL stores do), at most
// Config.MaxQueue are queued across the replicas sharing it: past it POST
// answers 503 unavailable with Retry-After (DESIGN §11).
//
// Bodies are read as their bytes arrive, never allocated from the declared
// Content-Length beyond a first buffer of at most 64 KiB (a body that
// declares less is read into one buffer of its size); at most Config.MaxBodies are read or held at once (past
// that, 503 unavailable with Retry-After), and each read has a deadline
// (Config.BodyIdleTimeout between chunks, Config.BodyTimeout in all) that
// the Handler sets itself through http.ResponseController, so it holds in
// any http.Server. What the Handler cannot set is the connection's limits
// before a request reaches it: an embedder that mounts the Handler in its
// own http.Server must set ReadHeaderTimeout, IdleTimeout and
// MaxHeaderBytes, or build the server with NewHTTPServer, which sets them
// to DefaultReadHeaderTimeout, DefaultIdleTimeout and
// DefaultMaxHeaderBytes. Do not set http.Server.ReadTimeout: it would
// also cut long polls short. A body with a transfer coding other than
// chunked (Transfer-Encoding: gzip, chunked) is refused by net/http with
// 501 Not Implemented before the Handler runs, and ACDS keeps it so: a
// compressed body is a decompression bomb that limits counted in received
// bytes could not bound.
//
// # Outages
//
// Every store call runs under Config.StoreTimeout (5 s): a database that
// stops answering, or whose link is cut, makes the requests that need it
// answer 503 unavailable with Retry-After within that time, and GET
// /v1/health answer 503 with status "degraded" (SPEC's shape otherwise;
// "healthy" with 200 when the store answers). Health reports the outcome
// of the store calls of the last second, or probes the store with one
// lookup. Nothing accepted is lost: a 202 is written only after the row is
// stored, and a worker whose final write fails leaves the request to be
// re-claimed when its lease expires. Recovery needs no restart: the next
// call that succeeds makes the server healthy again.
//
// # Metrics
//
// GET /metrics (outside /v1, like a Prometheus target expects) serves
// Config.Metrics, or a registry of the Server's own, in the Prometheus
// text format: requests by route pattern, method and status code and
// their latency; the queue's depth and the age of its oldest request (from
// the store, so across replicas; a Store that implements
// store.QueueStatter); workers and busy workers; requests ended by kind,
// status and problem code, counted after the outcome is stored; portal
// fetches by systemType and outcome; notarized sessions; whether an
// enclave and a fetcher are configured. No label value comes from a
// request: not a token, pseudonym, request id, portal host or record id.
// Config.NoMetricsEndpoint stops serving it (the collectors still
// register with Config.Metrics).
//
// Every error is application/problem+json with a stable type
// "urn:acds:problem:<code>"; see package acds for the codes.
package server
