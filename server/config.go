package server

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/acds-project/acds/store"
)

// Defaults for the zero values of Config.
const (
	DefaultTokenLifetime  = 24 * time.Hour
	DefaultMaxProcessBody = 32 << 20 // 32 MiB, POST /v1/process and POST /v1/verify (which carries the output)
	DefaultMaxBody        = 64 << 10 // 64 KiB, every other body
	DefaultMaxListBytes   = 32 << 20 // 32 MiB of records on a page of GET /v1/requests
	DefaultRateLimit      = 20       // requests per second per token
	DefaultAuthRateLimit  = 2        // requests per second per address on /v1/auth/*
	// DefaultVerifyRateLimit is the requests per second per address on
	// POST /v1/verify and the report page's upload (burst: five times it).
	DefaultVerifyRateLimit = 10
	DefaultLease           = 30 * time.Second
	DefaultPollInterval    = time.Second
	DefaultMaxAttempts     = 3
	DefaultProcessTimeout  = 5 * time.Minute
	DefaultCredentialTTL   = 15 * time.Minute
	DefaultRetention       = 30 * 24 * time.Hour
	DefaultStoreTimeout    = 5 * time.Second

	DefaultFailedTokenLimit = 1    // unknown or expired tokens per second per address, after a burst of 20
	DefaultMaxQueue         = 5000 // requests still processing
)

// Config configures a Server. Store is required; every other zero value
// is documented and useful.
type Config struct {
	// Store is the durable state. Required. The Server does not close it.
	Store store.Store

	// StoreTimeout bounds every call to Store. A call that exceeds it
	// fails: the request answers 503 unavailable with Retry-After, a
	// worker's write is retried (the request is re-claimed), and GET
	// /v1/health reports the store "degraded" until a call succeeds again.
	// Zero means DefaultStoreTimeout (5 s).
	StoreTimeout time.Duration

	// Pipeline processes FHIR. Nil: POST /v1/process and POST
	// /v1/fetch-and-attest answer 503 unavailable at once, naming it.
	Pipeline Pipeline
	// Enclave attests outputs and seals credentials. Nil: POST
	// /v1/process and POST /v1/fetch-and-attest answer 503 unavailable at
	// once, naming it, GET /v1/attestation answers 503 and health reports
	// the enclave as "none".
	Enclave Enclave
	// Fetcher admits and fetches portal records. Nil: POST
	// /v1/fetch-and-attest answers 503 unavailable.
	Fetcher Fetcher
	// Verifier serves POST /v1/verify. Nil: it answers 503 unavailable.
	Verifier Verifier

	// Logger receives structured logs. Nil discards them. Secrets never
	// reach it.
	Logger *slog.Logger
	// Now is the clock. Nil means time.Now.
	Now func() time.Time

	// TokenLifetime is how long a bearer token is valid. Zero means 24 h.
	TokenLifetime time.Duration
	// MaxProcessBody limits the POST /v1/process body in bytes, and the POST
	// /v1/verify body, which may carry the output it checks. Zero means 32 MiB.
	MaxProcessBody int64
	// MaxBody limits every other body in bytes. Zero means 64 KiB.
	MaxBody int64
	// MaxListBytes bounds the records a page of GET /v1/requests holds
	// in memory: the page ends after the request whose input, result and
	// error bring it to MaxListBytes (store.Page.MaxBytes), even short of
	// the limit the caller asked for, and its nextCursor goes on from
	// there. A page always holds one request. Zero means 32 MiB.
	MaxListBytes int
	// MaxBodies is how many request bodies may be read or held in memory
	// at once, across all endpoints; a request with a body past it answers
	// 503 unavailable with Retry-After before its body is read. Bodies are
	// read as their bytes arrive, never from the declared Content-Length,
	// so the memory they hold is at most MaxBodies × MaxProcessBody. Zero
	// means DefaultMaxBodies (64).
	MaxBodies int
	// BodyIdleTimeout is how long a body read may wait for the client's
	// next bytes; BodyTimeout bounds reading a whole body. Past either the
	// connection is closed without an answer. They are set per request
	// (http.ResponseController), so they hold in any http.Server the
	// Handler is mounted in. Zero means DefaultBodyIdleTimeout (15 s) and
	// DefaultBodyTimeout (2 min).
	BodyIdleTimeout time.Duration
	BodyTimeout     time.Duration
	// RateLimit is the per-token limit in requests per second (burst: twice
	// that, at least 1). Zero means DefaultRateLimit; negative turns it off.
	RateLimit float64
	// AuthRateLimit is the per-client-address limit in requests per second
	// on /v1/auth/* (burst: ten times that). The address is the
	// connection's remote IP. Zero means DefaultAuthRateLimit; negative
	// turns it off.
	AuthRateLimit float64
	// VerifyRateLimit is the per-client-address limit in requests per
	// second on POST /v1/verify and POST /verify (burst: five times that),
	// a bucket of its own: a CI job that verifies many bundles does not
	// use up its address's allowance of new sessions. Zero means
	// DefaultVerifyRateLimit; negative turns it off.
	VerifyRateLimit float64

	// FailedTokenLimit is how many unknown or expired bearer tokens one
	// client address may present per second, after a burst of
	// FailedTokenBurst (20). Past it the address's requests whose token is
	// not in the session cache answer 429 with Retry-After, without a
	// store lookup. Zero means DefaultFailedTokenLimit (1); negative turns
	// it off.
	FailedTokenLimit float64
	// MaxQueue bounds the requests still processing (queued or being
	// worked on) across every server sharing the Store, when the Store
	// can count them (store.QueueStatter). Past it POST /v1/process and POST
	// /v1/fetch-and-attest answer 503 unavailable with Retry-After instead
	// of accepting work that would wait too long. Zero means
	// DefaultMaxQueue (5000); negative turns the bound off.
	MaxQueue int

	// Workers is the number of requests processed concurrently. Zero means
	// 2 × GOMAXPROCS; negative means none (accept only: another replica
	// sharing the store processes).
	Workers int
	// Lease is how long a claimed request stays leased to a worker without
	// a heartbeat; workers heartbeat every Lease/3. Zero means 30 s.
	Lease time.Duration
	// PollInterval is how often an idle worker looks for claimable work
	// (work accepted by this Server wakes it at once). Zero means 1 s.
	PollInterval time.Duration
	// MaxAttempts is how many attempts a request is charged before it
	// fails because no worker finished it (an attempt that died with
	// others in its process is not charged). Zero means 3.
	MaxAttempts int
	// ProcessTimeout bounds one attempt; an attempt that exceeds it fails
	// the request with unavailable. Zero means 5 min.
	ProcessTimeout time.Duration
	// CredentialTTL is how long sealed portal credentials may stay queued
	// before they are erased. Zero means 15 min.
	CredentialTTL time.Duration

	// Retention is how long an ended request keeps its input, output and
	// proofs; the janitor then erases them and the record says when
	// (erasedAt), keeping its kind, status, times and a failure's problem.
	// Zero means 30 days; negative keeps everything.
	Retention time.Duration

	// Metrics is the Prometheus registry the server registers its
	// collectors with (DESIGN §11: requests by endpoint and status,
	// latency, queue depth and age, worker utilisation, fetch outcomes,
	// notary sessions). Nil: a registry of the server's own, with the Go
	// runtime and process collectors. Two open Servers need two
	// registries; Close unregisters the server's collectors, so a
	// registry can serve the next Server.
	Metrics *prometheus.Registry
	// NoMetricsEndpoint stops the handler from serving the registry at
	// GET /metrics (for an embedder that serves its registry itself, or
	// an operator who will not expose it on the API's listener).
	NoMetricsEndpoint bool

	// EventKeepAlive is how often GET /v1/requests/{id}/events sends a
	// keep-alive comment while nothing changes. Zero means 15 s.
	EventKeepAlive time.Duration
	// MaxEventStreams bounds the event streams one Server holds open at
	// once, and MaxEventStreamsPerOwner those of one pseudonym (all its
	// tokens together); past either the stream is refused with 429. Zero
	// means 1000 and 8.
	MaxEventStreams, MaxEventStreamsPerOwner int

	// Webhooks configures the deliveries of callbackUrl (webhooks.go).
	// The zero value is the documented defaults of WebhookOptions.
	Webhooks WebhookOptions
}

func (c *Config) withDefaults() (Config, error) {
	d := *c
	if d.Store == nil {
		return d, errors.New("server: config: Store is required")
	}
	// A Pipeline whose Check takes no format would compile and silently
	// lose its check at acceptance. Say so instead.
	if _, old := d.Pipeline.(interface {
		Check(context.Context, []byte) error
	}); old {
		if _, ok := d.Pipeline.(Checker); !ok {
			return d, errors.New("server: config: Pipeline has Check(ctx, input); the Checker interface is Check(ctx, input, format) — the output format asked for")
		}
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.TokenLifetime <= 0 {
		d.TokenLifetime = DefaultTokenLifetime
	}
	if d.MaxProcessBody <= 0 {
		d.MaxProcessBody = DefaultMaxProcessBody
	}
	if d.MaxBody <= 0 {
		d.MaxBody = DefaultMaxBody
	}
	if d.MaxListBytes <= 0 {
		d.MaxListBytes = DefaultMaxListBytes
	}
	if d.StoreTimeout <= 0 {
		d.StoreTimeout = DefaultStoreTimeout
	}
	if d.MaxBodies <= 0 {
		d.MaxBodies = DefaultMaxBodies
	}
	if d.BodyIdleTimeout <= 0 {
		d.BodyIdleTimeout = DefaultBodyIdleTimeout
	}
	if d.BodyTimeout <= 0 {
		d.BodyTimeout = DefaultBodyTimeout
	}
	if d.RateLimit == 0 {
		d.RateLimit = DefaultRateLimit
	}
	if d.AuthRateLimit == 0 {
		d.AuthRateLimit = DefaultAuthRateLimit
	}
	if d.VerifyRateLimit == 0 {
		d.VerifyRateLimit = DefaultVerifyRateLimit
	}
	if d.FailedTokenLimit == 0 {
		d.FailedTokenLimit = DefaultFailedTokenLimit
	}
	if d.MaxQueue == 0 {
		d.MaxQueue = DefaultMaxQueue
	}
	if d.Workers == 0 {
		d.Workers = 2 * runtime.GOMAXPROCS(0)
	}
	if d.Lease <= 0 {
		d.Lease = DefaultLease
	}
	if d.PollInterval <= 0 {
		d.PollInterval = DefaultPollInterval
	}
	if d.MaxAttempts <= 0 {
		d.MaxAttempts = DefaultMaxAttempts
	}
	if d.ProcessTimeout <= 0 {
		d.ProcessTimeout = DefaultProcessTimeout
	}
	if d.Retention == 0 {
		d.Retention = DefaultRetention
	}
	if d.CredentialTTL <= 0 {
		d.CredentialTTL = DefaultCredentialTTL
	}
	return d, nil
}
