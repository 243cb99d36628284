// Package store is the durable state of an ACDS server, as an interface an
// embedder can implement: anonymous sessions, recovery passphrases and the
// requests that workers process ([Store], its record types and errors, and
// the rules every implementation applies to its arguments).
//
// The service's own implementations, SQLite (the embedded default) and
// PostgreSQL (several server replicas sharing one database), are opened
// with service.OpenStore. Any implementation, theirs or yours, must pass
// the conformance suite in store/storetest; server/servertest has an
// in-memory one for tests.
//
// The store knows nothing about HTTP or the wire format: request inputs,
// results and errors are opaque bytes (JSON produced by the server).
//
// # Request lifecycle
//
// CreateRequest stores an accepted request as acds.StatusProcessing; when it
// returns nil the row is durable, so the server may answer 202. Workers
// call Claim, which leases the oldest claimable request to one worker for
// ClaimOptions.Lease and counts the attempt; the worker renews the lease
// with Heartbeat while it works and ends the request with Complete or Fail.
// A worker that dies stops heartbeating; once its lease has run out the
// request is claimable again, and after MaxAttempts claims Claim fails it
// with the Exhausted problem instead, so no request stays processing
// forever. A worker that learns ErrLeaseLost must drop its work: another
// worker holds the request, or it ended or was deleted. A lease that has
// run out but was not yet re-claimed still belongs to its worker. A worker
// that stops without an outcome (its server is closing) gives the lease
// back with Release.
//
// # Crash isolation
//
// A request whose processing kills the process (a query that exhausts
// memory) would, re-claimed like any other, kill every process that takes
// it, and each crash would cost an attempt of every request in flight
// beside it. With ClaimOptions.Isolate the store tells the guilty from the
// innocent without knowing which one it was: a request whose lease ran
// out while its attempt had not ended becomes a suspect ([Suspect]) and
// that attempt is not counted. Suspects are never claimed with the other
// requests; a claim with ClaimOptions.Solo, which its caller makes only
// when nothing else runs in its process and which keeps anything else
// from starting there until the attempt ends, leases one as [Solo]. A
// solo attempt ends like any other (an innocent bystander is charged one
// attempt, the one it ran alone), and one given back with Release leaves a
// suspect again; a solo lease that runs out is a process that died running
// that request alone, and the next claim fails the request with
// ClaimOptions.Crashed. So a request that kills its process is retried
// once, alone, and then fails; Suspects tells a server when to make room
// for a solo claim.
//
// Leases are compared with the times callers pass in (ClaimOptions.Now,
// Heartbeat's until): replicas sharing a PostgreSQL database need clocks
// in sync to well within a lease.
//
// # Data
//
// Times are kept with microsecond precision and returned in UTC. Sealed
// credentials are erased (set to nil) when a request ends and by
// EraseSealedBefore; DeleteRequest removes the whole row. ListRequests
// pages newest first by (CreatedAt, ID); its cursor is opaque, and one the
// store did not issue is ErrInvalid.
//
// # Schema
//
// The SQLite and PostgreSQL implementations embed their schema as
// numbered migrations and apply the missing ones when they open a
// database, recording them in a schema_migrations table; a database
// migrated by a newer build is refused.
package store

import (
	"context"
	"errors"
	"time"
)

// Errors returned by every backend. Test with errors.Is.
var (
	// ErrNotFound: no such row, or the row belongs to another owner.
	ErrNotFound = errors.New("store: not found")
	// ErrConflict: a row with the same key already exists.
	ErrConflict = errors.New("store: conflict")
	// ErrLeaseLost: the caller no longer holds the lease on a request
	// (it expired and another worker claimed it, or the request ended).
	ErrLeaseLost = errors.New("store: lease lost")
	// ErrInvalid: an argument is malformed (an empty id, a token hash that
	// is not 32 bytes, a cursor this store did not issue, …). Servers map
	// it to a 400 when the bad value came from a client (a cursor).
	ErrInvalid = errors.New("store: invalid argument")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store: closed")
	// ErrCorrupt: a stored value cannot be decoded (the database file was
	// damaged or altered outside the store).
	ErrCorrupt = errors.New("store: corrupt stored value")
	// ErrFull: the store's disk is too full to take the write. The
	// database is reachable, and deletions still work; retry once room
	// is made. Servers answer it with 503 and Retry-After.
	ErrFull = errors.New("store: full")
	// ErrDataLoss: opening the store found that its database has lost
	// writes it had acknowledged (it is behind the high-water mark the
	// store keeps outside it, or it is new or damaged while the
	// installation holds state), so it refused to open rather than serve
	// an earlier state as if it were the latest. Only a store that keeps
	// such a mark returns it.
	ErrDataLoss = errors.New("store: acknowledged data lost")
)

// Session is an anonymous session: a pseudonym and the SHA-256 of its bearer
// token. The token itself is never stored.
type Session struct {
	// Pseudonym is the session's key: the pseudonym itself, or, since a
	// pseudonym may hold several sessions (one per recovery), the
	// pseudonym followed by "." and a suffix that makes the key unique
	// (SessionOwner returns the pseudonym of a key).
	Pseudonym string
	TokenHash []byte // SHA-256 of the bearer token, 32 bytes
	CreatedAt time.Time
	ExpiresAt time.Time
}

// Request is one accepted request and its lifecycle state.
type Request struct {
	ID     string // a UUID (the server makes version 7, time-ordered)
	Owner  string // pseudonym of the session that created it
	Kind   string // acds.KindProcess or acds.KindFetchAndAttest
	Status string // acds.StatusProcessing, acds.StatusCompleted or acds.StatusFailed

	// Input is the request body as accepted (JSON), without credentials.
	Input []byte
	// Sealed holds credentials sealed by the enclave (fetch-and-attest only).
	// It is erased when the request ends and by EraseSealedBefore.
	Sealed []byte
	// Affinity, when not empty, reserves the request for the workers that
	// claim with the same ClaimOptions.Affinity: the replica whose enclave
	// sealed the credentials (at most MaxIDLen bytes). It is cleared with
	// Sealed, after which any worker may claim the request.
	Affinity string

	// Result is the JSON result object of a completed request.
	Result []byte
	// Error is the JSON problem object of a failed request.
	Error []byte

	// Attempts is the number of attempts counted against
	// ClaimOptions.MaxAttempts: one for each claim, less those that
	// crash isolation took back (an attempt that died while others ran
	// beside it).
	Attempts   int
	Isolation  Isolation // where the request stands in crash isolation
	LeaseOwner string    // worker holding the lease, "" when none
	LeaseUntil time.Time // lease expiry; zero when none

	CreatedAt   time.Time
	UpdatedAt   time.Time
	CompletedAt time.Time // zero until the request ends
	// ErasedAt is when the retention time erased the ended request's
	// input, result and sealed data (EraseEndedBefore); zero until then.
	ErasedAt time.Time

	// Callback is the URL a [Webhooks] store delivers the request's
	// outcome to once it ends (DESIGN §10): CreateRequest writes the
	// pending delivery with the request, atomically. "" for none. A store
	// that is not a Webhooks store ignores it (servers check first).
	// GetRequest does not return it.
	Callback string
}

// Page selects a page of an owner's requests, newest first.
type Page struct {
	// Cursor is the opaque NextCursor of a previous page; "" starts at the newest.
	Cursor string
	// Limit is the page size; backends clamp it to 1..100.
	Limit int
	// MaxBytes bounds the memory a page holds: the page ends after the
	// request whose input, sealed data, result and error bring the page's
	// total to MaxBytes or past it, even when fewer than Limit requests
	// are on it (its cursor then continues after that request). A page
	// always holds at least one request. Zero or less means no bound.
	MaxBytes int
}

// ClaimOptions tells Claim who claims and under which rules.
type ClaimOptions struct {
	Worker      string        // unique id of the claiming worker; required
	Lease       time.Duration // how long the lease lasts before it must be renewed; must be > 0
	MaxAttempts int           // a request already claimed this many times is failed, not claimed; 0 means no limit
	// Exhausted is the JSON problem stored on a request failed because its
	// attempts are exhausted.
	Exhausted []byte
	// Affinity is the claiming worker's: it claims requests without an
	// affinity and those with this one, never another's. Zero value: any
	// request, whatever its affinity.
	Affinity string
	// Now is the current time; the zero value means time.Now().
	Now time.Time

	// Isolate turns on crash isolation (see the package documentation).
	// With it a request whose lease ran out is not claimed again: it
	// becomes a Suspect, its lost attempt uncounted, and waits for a Solo
	// claim. Zero value: a request whose lease ran out is claimable like
	// any other, and its next claim counts one more attempt.
	Isolate bool
	// Solo (with Isolate) claims only a Suspect, or a request whose lease
	// ran out (which thereby becomes one), and leases it as Solo. The
	// caller promises that nothing else runs in its process until the
	// attempt ends.
	Solo bool
	// Crashed (with Isolate) is the JSON problem stored on a request
	// whose Solo lease ran out: its process died running it alone.
	Crashed []byte
}

// Isolation is where a request stands in crash isolation
// (ClaimOptions.Isolate); see the package documentation.
type Isolation int

const (
	// NotIsolated: no attempt of the request has died.
	NotIsolated Isolation = iota
	// Suspect: an attempt died (its lease ran out before it ended) while
	// other attempts may have run in the same process; the request waits
	// for a claim with ClaimOptions.Solo.
	Suspect
	// Solo: leased by a claim with ClaimOptions.Solo, to a worker that
	// runs it alone in its process. If this lease runs out, the request
	// is failed with ClaimOptions.Crashed.
	Solo
)

// QueueStats is what a store reports about the requests still in
// acds.StatusProcessing (queued or running), for an operator's metrics.
type QueueStats struct {
	// Processing is the number of requests not yet completed or failed.
	Processing int
	// Oldest is the creation time of the oldest of them; zero when there
	// is none.
	Oldest time.Time
}

// QueueStatter is implemented by a Store that can report its queue
// cheaply (both stores of this module do, from the index of claimable
// requests). A server reports queue depth and age in its metrics only
// when its Store implements it.
type QueueStatter interface {
	QueueStats(ctx context.Context) (QueueStats, error)
}

// Delivery is a pending webhook delivery: the outcome of request
// RequestID (of Owner) is to be POSTed to URL.
type Delivery struct {
	RequestID, Owner, URL string
	// Attempts counts the claims of this delivery, the current one
	// included.
	Attempts int
	// NextAt is when the delivery is due again (a claim leases it by
	// moving NextAt to the lease's end).
	NextAt time.Time
	// LastError describes the last failed attempt ("" before one).
	LastError string
	// CreatedAt is when the request, and so the delivery, was created.
	CreatedAt time.Time
}

// Webhooks is implemented by a Store that keeps webhook deliveries
// durably, in the same database as the requests (both stores of this
// module do): a request created with a Callback has a delivery from the
// moment it exists, which survives restarts and ends only by
// EndDelivery or by deleting the request. A server accepts callbackUrl
// only when its Store implements it.
type Webhooks interface {
	// ClaimDelivery leases the most overdue delivery whose request has
	// ended (completed or failed) and whose NextAt is at or before now:
	// it moves NextAt to until and increments Attempts, so that no other
	// claim (of any replica) takes it before until. It returns (nil, nil)
	// when none is due.
	ClaimDelivery(ctx context.Context, now, until time.Time) (*Delivery, error)
	// RetryDelivery records a failed attempt: the delivery is due again
	// at next. ErrNotFound when the delivery is gone.
	RetryDelivery(ctx context.Context, requestID string, next time.Time, lastError string) error
	// EndDelivery removes a delivery that succeeded or was given up.
	// ErrNotFound when it is gone.
	EndDelivery(ctx context.Context, requestID string) error
}

// Store is the durable state of a server. Every method is safe for
// concurrent use, and a method that returns nil has made its change durable.
type Store interface {
	// CreateSession stores a new session. ErrConflict if the pseudonym or
	// token hash exists.
	CreateSession(ctx context.Context, s Session) error
	// SessionByTokenHash returns the session whose token hash matches.
	// ErrNotFound when none (expiry is the caller's check).
	SessionByTokenHash(ctx context.Context, tokenHash []byte) (Session, error)
	// SetPassphrase stores the encoded Argon2id hash of a pseudonym's recovery passphrase.
	SetPassphrase(ctx context.Context, pseudonym, encodedHash string) error
	// Passphrase returns the encoded passphrase hash; ErrNotFound when none.
	Passphrase(ctx context.Context, pseudonym string) (string, error)
	// DeleteExpiredSessions removes sessions that expired before now.
	DeleteExpiredSessions(ctx context.Context, now time.Time) (int, error)
	// DeleteSession removes the session with that token hash (revocation);
	// ErrNotFound when there is none.
	DeleteSession(ctx context.Context, tokenHash []byte) error
	// DeleteSessionsOf removes every session of pseudonym (every key
	// SessionOwner maps to it) except the one whose token hash is keep
	// (nil keeps none), and returns how many it removed.
	DeleteSessionsOf(ctx context.Context, pseudonym string, keep []byte) (int, error)

	// CreateRequest stores a new request in acds.StatusProcessing. When it
	// returns nil the row is on disk.
	CreateRequest(ctx context.Context, r Request) error
	// GetRequest returns the owner's request; ErrNotFound if it does not
	// exist or belongs to another owner.
	GetRequest(ctx context.Context, owner, id string) (Request, error)
	// ListRequests returns a page of the owner's requests, newest first, and
	// the cursor of the next page ("" when there is none).
	ListRequests(ctx context.Context, owner string, p Page) ([]Request, string, error)
	// DeleteRequest erases the owner's request with its input, output and
	// sealed data; ErrNotFound as GetRequest.
	DeleteRequest(ctx context.Context, owner, id string) error

	// Claim leases the oldest claimable request (processing, and not leased
	// or its lease expired) to o.Worker, incrementing Attempts. A claimable
	// request whose Attempts already reached o.MaxAttempts is instead failed
	// with o.Exhausted (and its Sealed erased) and Claim moves on. Returns
	// (nil, nil) when nothing is claimable. Each request is leased to at most
	// one worker at a time, across processes sharing the database.
	Claim(ctx context.Context, o ClaimOptions) (*Request, error)
	// Heartbeat extends the worker's lease to until; ErrLeaseLost when the
	// worker no longer holds it.
	Heartbeat(ctx context.Context, id, worker string, until time.Time) error
	// Release gives back the worker's lease on a request that it stops
	// working on without an outcome (its server is closing): the request
	// stays processing and is claimable at once, and a Solo request is a
	// Suspect again; the attempt stays counted. ErrLeaseLost when the
	// worker no longer holds the lease.
	Release(ctx context.Context, id, worker string) error
	// Suspects returns how many requests a claim with Isolate and Solo at
	// now, with that affinity, could lease: Suspects, and requests whose
	// lease ran out before now with their attempt not ended (which such a
	// claim turns into suspects).
	Suspects(ctx context.Context, now time.Time, affinity string) (int, error)
	// Complete ends the request as completed with result, erasing Sealed;
	// ErrLeaseLost when the worker no longer holds the lease.
	Complete(ctx context.Context, id, worker string, result []byte, now time.Time) error
	// Fail ends the request as failed with problem, erasing Sealed;
	// ErrLeaseLost as Complete.
	Fail(ctx context.Context, id, worker string, problem []byte, now time.Time) error
	// EraseSealedBefore erases Sealed on requests created before t (the
	// credential TTL) and returns how many it erased.
	EraseSealedBefore(ctx context.Context, t time.Time) (int, error)
	// EraseEndedBefore erases Input, Result and Sealed of at most limit
	// requests that ended (completed or failed) before t and are not yet
	// erased, setting ErasedAt (and UpdatedAt) to now; the status, the
	// times and a failed request's Error stay. It returns how many it
	// erased; fewer than limit means none is left.
	EraseEndedBefore(ctx context.Context, t, now time.Time, limit int) (int, error)

	// Close releases the store's resources.
	Close() error
}

// TrustAnchor is the public material one replica registers so that every
// replica sharing the store verifies its bundles (POST /v1/verify): what
// its own verifier trusts for itself (its measurement, its simulated root
// or TPM attestation key, its notary keys), encoded by the server as
// opaque bytes like request inputs. It holds nothing secret.
type TrustAnchor struct {
	// Replica is the registering replica's id, the key: a replica
	// registering again replaces its anchor (at most MaxIDLen bytes).
	Replica string
	// Anchor is the encoded trust material (1..MaxAnchorLen bytes).
	Anchor []byte
	// UpdatedAt is when the anchor was last registered; the store sets it.
	UpdatedAt time.Time
}

// MaxAnchorLen bounds TrustAnchor.Anchor: a simulated root certificate,
// a measurement and a few keys fit in a few kilobytes.
const MaxAnchorLen = 64 << 10

// TrustRegistry is implemented by a Store that keeps the trust anchors of
// the replicas sharing it (both stores of this module and
// servertest.MemStore do). Anyone who can write the database can add an
// anchor, and with it a trusted enclave: a server that trusts the
// registry trusts its database as much as its own data directory. A
// server whose Store does not implement it trusts only itself.
type TrustRegistry interface {
	// PutTrustAnchor stores a, replacing the anchor of the same Replica,
	// with UpdatedAt set to now. ErrInvalid for an empty or too long
	// Replica or Anchor.
	PutTrustAnchor(ctx context.Context, a TrustAnchor, now time.Time) error
	// TrustAnchors returns every registered anchor, ordered by Replica.
	TrustAnchors(ctx context.Context) ([]TrustAnchor, error)
}
