package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/acds-project/acds"
)

// Server is an ACDS API server: an http.Handler for the v1 contract and
// the workers that process accepted requests. Construct it with New, mount
// Handler anywhere, and Close it to drain.
type Server struct {
	cfg      Config
	log      *slog.Logger
	started  time.Time
	instance string // random id of this Server, prefix of its worker ids

	st           *deadlineStore // cfg.Store, under the store deadline
	sessions     *sessionCache
	argon        chan struct{} // semaphore of concurrent Argon2id computations
	bodies       chan struct{} // semaphore of request bodies read or held (Config.MaxBodies)
	tokenLimits  *limiterSet
	addrLimits   *limiterSet // /v1/auth/*
	verifyLimits *limiterSet // POST /v1/verify, POST /verify
	failLimits   *limiterSet // unknown or expired bearer tokens, per address
	queue        queueGauge
	handler      http.Handler
	metrics      *metrics

	wake      chan struct{}   // accepted work: wake an idle worker
	alone     *aloneGate      // lets the isolator run a suspect alone
	exhausted []byte          // the problem of a request out of attempts
	crashed   []byte          // the problem of a request that killed its process twice
	waiters   *waiters        // long-polling GETs and the requests local workers run
	attempts  runningAttempts // the attempts local workers run, stopped by DELETE
	streams   eventStreams    // open event streams (events.go)
	stopClaim context.CancelFunc
	claimCtx  context.Context // done when workers must stop claiming
	abortWork context.CancelFunc
	workCtx   context.Context // done when in-flight work must be abandoned
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// New returns a Server for cfg and starts its workers and janitor.
func New(cfg Config) (*Server, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	var id [6]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("server: instance id: %w", err)
	}
	// Every store call runs under the store deadline (deadlineStore).
	st := &deadlineStore{Store: c.Store, timeout: c.StoreTimeout, health: &storeHealth{now: time.Now}}
	c.Store = st
	s := &Server{
		st:       st,
		cfg:      c,
		log:      c.Logger,
		started:  c.Now(),
		instance: hex.EncodeToString(id[:]),
		wake:     make(chan struct{}, max(c.Workers, 1)),
		waiters:  newWaiters(),
		alone:    newAloneGate(),
		crashed:  crashedProblem(),
	}
	s.exhausted = s.exhaustedProblem()
	s.sessions = newSessionCache(100_000)
	s.argon = make(chan struct{}, max(2, runtime.GOMAXPROCS(0)))
	s.bodies = make(chan struct{}, c.MaxBodies)
	tokenBurst := int(2 * c.RateLimit)
	s.tokenLimits = newLimiterSet(c.RateLimit, tokenBurst)
	s.addrLimits = newLimiterSet(c.AuthRateLimit, int(10*c.AuthRateLimit))
	s.verifyLimits = newLimiterSet(c.VerifyRateLimit, int(5*c.VerifyRateLimit))
	if s.metrics, err = newMetrics(s, c.Metrics); err != nil {
		return nil, fmt.Errorf("server: metrics: %w", err)
	}
	s.failLimits = newLimiterSet(c.FailedTokenLimit, FailedTokenBurst)
	s.handler = s.routes()
	s.claimCtx, s.stopClaim = context.WithCancel(context.Background())
	s.workCtx, s.abortWork = context.WithCancel(context.Background())
	s.sweep() // erase expired credentials before any worker can claim them
	for i := 0; i < c.Workers; i++ {
		s.wg.Add(1)
		go s.worker(fmt.Sprintf("%s/%d", s.instance, i))
	}
	if c.Workers > 0 {
		s.wg.Add(1)
		go s.isolator()
	}
	s.wg.Add(1)
	go s.janitor()
	s.startWebhooks() // webhooks.go
	return s, nil
}

// Handler returns the HTTP handler of the v1 API. It serves paths that
// start with /v1/ and can be mounted under any prefix with
// http.StripPrefix: Location headers keep the prefix.
func (s *Server) Handler() http.Handler { return s.handler }

// Close stops claiming new work and waits for in-flight requests to finish
// until ctx ends; requests still running then are abandoned and given back
// to the store, for another worker, here or in another replica, to claim.
// The handler keeps accepting requests durably after Close; the Store is
// not closed. Close takes the server's collectors off Config.Metrics. It
// returns ctx.Err() when it had to abandon work.
func (s *Server) Close(ctx context.Context) error {
	var err error
	s.closeOnce.Do(func() {
		s.stopClaim()
		done := make(chan struct{})
		go func() { s.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			err = ctx.Err()
			s.abortWork()
			<-done
		}
		s.abortWork()
		s.metrics.unregister()
	})
	return err
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	add := func(pattern string, methods map[string]http.HandlerFunc) {
		mux.Handle(pattern, s.methodSwitch(methods))
	}
	add("/v1/auth/anon", map[string]http.HandlerFunc{http.MethodPost: s.addrLimited(s.addrLimits, s.bodyGate(s.handleAnon))})
	add("/v1/auth/recover", map[string]http.HandlerFunc{http.MethodPost: s.addrLimited(s.addrLimits, s.bodyGate(s.handleRecover))})
	add("/v1/auth/revoke", map[string]http.HandlerFunc{http.MethodPost: s.authed(s.bodyGate(s.handleRevoke))})
	add("/v1/fetch-and-attest", map[string]http.HandlerFunc{http.MethodPost: s.authed(s.bodyGate(s.handleFetchAndAttest))})
	add("/v1/process", map[string]http.HandlerFunc{http.MethodPost: s.authed(s.bodyGate(s.handleProcess))})
	add("/v1/requests", map[string]http.HandlerFunc{http.MethodGet: s.authed(s.handleList)})
	add("/v1/requests/{id}", map[string]http.HandlerFunc{
		http.MethodGet:    s.authed(s.handleGet),
		http.MethodDelete: s.authed(s.handleDelete),
	})
	add("/v1/requests/{id}/events", map[string]http.HandlerFunc{http.MethodGet: s.authed(s.handleEvents)}) // events.go
	add("/v1/verify", map[string]http.HandlerFunc{http.MethodPost: s.addrLimited(s.verifyLimits, s.bodyGate(s.handleVerify))})
	add("/v1/health", map[string]http.HandlerFunc{http.MethodGet: s.handleHealth})
	add("/v1/openapi.json", map[string]http.HandlerFunc{http.MethodGet: s.handleOpenAPI})
	add("/v1/attestation", map[string]http.HandlerFunc{http.MethodGet: s.handleAttestation})
	add("/verify", map[string]http.HandlerFunc{http.MethodGet: s.handleReportPage, http.MethodPost: s.addrLimited(s.verifyLimits, s.handleReportUpload)}) // report.go
	if !s.cfg.NoMetricsEndpoint {
		add("/metrics", map[string]http.HandlerFunc{http.MethodGet: s.metrics.handler().ServeHTTP})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, acds.NewProblem(acds.ProblemNotFound, "no such endpoint"))
	})
	return s.metrics.instrument(s.recoverPanics(cleanPaths(mux)))
}

// cleanPaths answers a path that is not in its clean form (a doubled
// slash, a dot segment) with a not-found problem naming the clean path,
// where http.ServeMux would redirect with an HTML body: a client joining
// a base URL that ends in a slash learns what to fix, in the API's own
// error format.
func cleanPaths(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if p != "" && p != "*" {
			clean := path.Clean(p)
			if !strings.HasPrefix(clean, "/") {
				clean = "/" + clean
			}
			if clean != p && clean+"/" != p { // a trailing slash is the mux's business (404)
				writeProblem(w, acds.NewProblem(acds.ProblemNotFound, fmt.Sprintf("no such endpoint: the path is not in clean form; did you mean %s?", clean)))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) methodSwitch(methods map[string]http.HandlerFunc) http.Handler {
	allow := make([]string, 0, len(methods)+1)
	for m := range methods {
		allow = append(allow, m)
	}
	if _, ok := methods[http.MethodGet]; ok {
		allow = append(allow, http.MethodHead)
	}
	allowHeader := strings.Join(allow, ", ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, ok := methods[r.Method]
		if !ok && r.Method == http.MethodHead {
			h, ok = methods[http.MethodGet]
		}
		if !ok {
			w.Header().Set("Allow", allowHeader)
			writeProblem(w, acds.NewProblem(acds.ProblemMethodNotAllowed, r.Method+" is not allowed here; allowed: "+allowHeader))
			return
		}
		h(w, r)
	})
}

// recoverPanics turns a handler panic into a 500 internal problem.
func (s *Server) recoverPanics(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("handler panic", "path", r.URL.Path, "panic", fmt.Sprint(v))
				writeProblem(w, acds.NewProblem(acds.ProblemInternal, "unexpected server error"))
			}
		}()
		h.ServeHTTP(w, r)
	})
}

type ctxKey int

const (
	ownerKey ctxKey = iota
	tokenHashKey
)

// authed requires a valid, unexpired bearer token and applies the
// per-token rate limit. The handler finds the owner with ownerFrom.
func (s *Server) authed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		// Two Authorization fields are ambiguous: a proxy in front may
		// have read one and the server the other. Refuse them all.
		if len(r.Header.Values("Authorization")) > 1 {
			writeProblem(w, acds.NewProblem(acds.ProblemUnauthorized, "more than one Authorization header; send exactly one bearer token"))
			return
		}
		auth := r.Header.Get("Authorization")
		scheme, token, ok := strings.Cut(auth, " ")
		if auth == "" {
			writeProblem(w, acds.NewProblem(acds.ProblemUnauthorized, "a bearer token is required (POST /v1/auth/anon issues one)"))
			return
		}
		hash, valid := parseToken(strings.TrimSpace(token))
		if !ok || !strings.EqualFold(scheme, "Bearer") || !valid {
			writeProblem(w, acds.NewProblem(acds.ProblemUnauthorized, "the Authorization header is not a well-formed ACDS bearer token"))
			return
		}
		now := s.cfg.Now()
		// A token the cache does not know costs a store lookup: an
		// address that presented too many unknown tokens is refused
		// before that lookup.
		addr := ""
		if !s.sessions.has(hash, now) {
			addr = clientAddr(r)
			if blocked, wait := s.failLimits.blocked(addr, now); blocked {
				p := acds.NewProblem(acds.ProblemRateLimited, "too many unknown or expired tokens from this address")
				p.RetryAfter = wait
				writeProblem(w, p)
				return
			}
		}
		owner, found, err := s.lookupSession(r.Context(), hash, now)
		if err != nil {
			s.log.Error("session lookup failed", "err", err)
			p := acds.NewProblem(acds.ProblemUnavailable, "the session store is unavailable; retry later")
			p.RetryAfter = storeRetryAfter
			writeProblem(w, p)
			return
		}
		if !found {
			if addr == "" {
				addr = clientAddr(r)
			}
			s.failLimits.allow(addr, now)
			writeProblem(w, acds.NewProblem(acds.ProblemUnauthorized, "the token is unknown or expired"))
			return
		}
		if ok, wait := s.tokenLimits.allow(string(hash), now); !ok {
			p := acds.NewProblem(acds.ProblemRateLimited, "too many requests for this token")
			p.RetryAfter = wait
			writeProblem(w, p)
			return
		}
		ctx := context.WithValue(r.Context(), ownerKey, owner)
		h(w, r.WithContext(context.WithValue(ctx, tokenHashKey, hash)))
	}
}

func ownerFrom(r *http.Request) string {
	o, _ := r.Context().Value(ownerKey).(string)
	return o
}

// tokenHashFrom returns the SHA-256 of the request's bearer token (authed
// handlers only).
func tokenHashFrom(r *http.Request) []byte {
	h, _ := r.Context().Value(tokenHashKey).([]byte)
	return h
}

// addrLimited applies a per-address limit (set) to an unauthenticated
// endpoint that costs CPU (Argon2id, verification).
func (s *Server) addrLimited(set *limiterSet, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if ok, wait := set.allow(clientAddr(r), s.cfg.Now()); !ok {
			p := acds.NewProblem(acds.ProblemRateLimited, "too many requests from this address")
			p.RetryAfter = wait
			writeProblem(w, p)
			return
		}
		h(w, r)
	}
}

// locationFor returns the Location of request id as seen by the client.
func locationFor(r *http.Request, id string) string {
	return mountPrefix(r) + "/v1/requests/" + id
}

// mountPrefix returns the path prefix the handler is mounted under
// (http.StripPrefix), without a trailing slash: the original request URI
// still has it. "" when mounted at the root.
func mountPrefix(r *http.Request) string {
	if u, err := url.ParseRequestURI(r.RequestURI); err == nil {
		if p, ok := strings.CutSuffix(u.Path, r.URL.Path); ok {
			return strings.TrimSuffix(p, "/")
		}
	}
	return ""
}

// janitor erases expired sealed credentials and sessions and idle rate
// buckets every minute until Close.
func (s *Server) janitor() {
	defer s.wg.Done()
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-s.claimCtx.Done():
			return
		case <-t.C:
		}
		s.sweep()
	}
}

// eraseBatch is how many ended requests one store call erases, so that a
// sweep after a long pause (or the first one with a shorter retention)
// never holds the database in one long write.
const eraseBatch = 500

// eraseEnded erases the input, output and proofs of requests that ended
// more than Config.Retention ago, a batch at a time, until none is left
// or ctx ends (the next sweep continues).
func (s *Server) eraseEnded(ctx context.Context, now time.Time) {
	total := 0
	for ctx.Err() == nil {
		n, err := s.cfg.Store.EraseEndedBefore(ctx, now.Add(-s.cfg.Retention), now, eraseBatch)
		if err != nil {
			s.log.Warn("erasing requests past their retention failed", "err", err)
			break
		}
		total += n
		if n < eraseBatch {
			break
		}
	}
	if total > 0 {
		s.log.Info("erased requests past their retention", "requests", total, "retention", s.cfg.Retention.String())
	}
}

func (s *Server) sweep() {
	ctx, cancel := context.WithTimeout(s.workCtx, 30*time.Second)
	defer cancel()
	now := s.cfg.Now()
	if n, err := s.cfg.Store.EraseSealedBefore(ctx, now.Add(-s.cfg.CredentialTTL)); err != nil {
		s.log.Warn("erasing expired credentials failed", "err", err)
	} else if n > 0 {
		s.log.Info("erased expired credentials", "requests", n)
	}
	if _, err := s.cfg.Store.DeleteExpiredSessions(ctx, now); err != nil {
		s.log.Warn("deleting expired sessions failed", "err", err)
	}
	if s.cfg.Retention > 0 {
		s.eraseEnded(ctx, now)
	}
	s.tokenLimits.sweep(now, 10*time.Minute)
	s.addrLimits.sweep(now, 10*time.Minute)
	s.verifyLimits.sweep(now, 10*time.Minute)
	s.failLimits.sweep(now, 10*time.Minute)
}
