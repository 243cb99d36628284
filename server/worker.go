package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/fhir"
	"github.com/acds-project/acds/portal"
	"github.com/acds-project/acds/store"
)

// The request lifecycle. A worker claims the oldest claimable request with
// a lease of cfg.Lease and heartbeats every Lease/3 while it works. When
// the worker dies (process killed, panic), its heartbeats stop, the lease
// expires and the request becomes a suspect of crash isolation (store
// package documentation): every request in flight on a dead process is
// one, since which of them killed it is unknown. Suspects are retried one
// at a time, each alone in its process (the isolator below); one whose
// solo attempt dies too is failed by the store with the crashed problem,
// and the others are not charged for the crash. A request claimed
// cfg.MaxAttempts times without ending is failed by the store with the
// exhausted problem. So every accepted request ends, exactly once, in
// completed or failed, and a request that kills its process is retried
// once. A worker that stops because the server closes gives its lease
// back.

// errAbandon means: stop working on this request without ending it; the
// lease will expire and the request will be re-claimed.
var errAbandon = errors.New("attempt abandoned")

func (s *Server) exhaustedProblem() []byte {
	p := acds.NewProblem(acds.ProblemInternal, fmt.Sprintf(
		"processing was attempted %d times and no attempt finished (the worker stopped or crashed each time); the request will not be retried",
		s.cfg.MaxAttempts))
	b, _ := json.Marshal(p)
	return b
}

// crashedProblem is the problem of a request whose attempt ended with the
// process dying, and whose retry, alone in its process, did too.
func crashedProblem() []byte {
	b, _ := json.Marshal(acds.NewProblem(acds.ProblemInternal,
		"processing could not complete: the process stopped during this request's attempt, and again when the request was retried alone; the request will not be retried"))
	return b
}

// claimOptions are the options of a claim by worker, solo or not.
func (s *Server) claimOptions(worker string, solo bool) store.ClaimOptions {
	return store.ClaimOptions{
		Worker: worker, Lease: s.cfg.Lease, MaxAttempts: s.cfg.MaxAttempts,
		Exhausted: s.exhausted, Now: s.cfg.Now(), Affinity: s.affinity(),
		Isolate: true, Solo: solo, Crashed: s.crashed,
	}
}

func (s *Server) worker(id string) {
	defer s.wg.Done()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		if s.claimCtx.Err() != nil || !s.alone.enter(s.claimCtx) {
			return
		}
		req, err := s.cfg.Store.Claim(s.claimCtx, s.claimOptions(id, false))
		if err != nil && s.claimCtx.Err() == nil {
			s.log.Warn("claim failed", "worker", id, "err", err)
		}
		if req != nil {
			s.runMeasured(id, req)
			s.alone.leave()
			continue // there may be more
		}
		s.alone.leave()
		timer.Reset(s.cfg.PollInterval)
		select {
		case <-s.claimCtx.Done():
			return
		case <-s.wake:
		case <-timer.C:
		}
	}
}

// isolator retries suspects, one at a time, alone in this process: every
// PollInterval it asks the store whether there are suspects this server
// may claim; if so, it stops the workers from claiming, waits for the
// attempts they run to end, and runs one suspect with a solo claim.
func (s *Server) isolator() {
	defer s.wg.Done()
	id := s.instance + "/solo"
	timer := time.NewTimer(s.cfg.PollInterval)
	defer timer.Stop()
	for {
		select {
		case <-s.claimCtx.Done():
			return
		case <-timer.C:
		}
		timer.Reset(s.cfg.PollInterval)
		n, err := s.cfg.Store.Suspects(s.claimCtx, s.cfg.Now(), s.affinity())
		if err != nil && s.claimCtx.Err() == nil {
			s.log.Warn("looking for suspects failed", "err", err)
		}
		if n == 0 {
			continue
		}
		if !s.alone.take(s.claimCtx) {
			return
		}
		req, err := s.cfg.Store.Claim(s.claimCtx, s.claimOptions(id, true))
		if err != nil && s.claimCtx.Err() == nil {
			s.log.Warn("solo claim failed", "err", err)
		}
		if req != nil {
			s.log.Warn("retrying a request alone: its attempt was in flight when a process died", "request_id", req.ID)
			s.runMeasured(id, req)
			timer.Reset(0) // there may be more
		}
		s.alone.give()
	}
}

// runMeasured runs req and counts it in the worker metrics.
func (s *Server) runMeasured(worker string, req *store.Request) {
	s.metrics.busy.Add(1)
	start := time.Now()
	s.run(worker, req)
	s.metrics.attempts.WithLabelValues(req.Kind).Observe(time.Since(start).Seconds())
	s.metrics.busy.Add(-1)
}

// aloneGate lets the isolator run an attempt alone in the process: the
// workers enter it around each claim and attempt, and take waits until
// none is inside and keeps them out until give.
type aloneGate struct {
	mu      sync.Mutex
	inside  int           // workers claiming or running an attempt
	taken   bool          // the isolator holds, or waits for, the process
	changed chan struct{} // closed and replaced when inside or taken changes
}

func newAloneGate() *aloneGate { return &aloneGate{changed: make(chan struct{})} }

// signal wakes every waiter; the caller holds g.mu.
func (g *aloneGate) signal() {
	close(g.changed)
	g.changed = make(chan struct{})
}

// enter waits until the gate is not taken and enters it; false when ctx
// ended first.
func (g *aloneGate) enter(ctx context.Context) bool {
	for {
		g.mu.Lock()
		if !g.taken {
			g.inside++
			g.mu.Unlock()
			return true
		}
		ch := g.changed
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// leave undoes enter.
func (g *aloneGate) leave() {
	g.mu.Lock()
	g.inside--
	g.signal()
	g.mu.Unlock()
}

// take keeps workers from entering and waits until none is inside; false
// (and the gate given back) when ctx ended first. One caller at a time.
func (g *aloneGate) take(ctx context.Context) bool {
	g.mu.Lock()
	g.taken = true
	g.mu.Unlock()
	for {
		g.mu.Lock()
		if g.inside == 0 {
			g.mu.Unlock()
			return true
		}
		ch := g.changed
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			g.give()
			return false
		}
	}
}

// give undoes take.
func (g *aloneGate) give() {
	g.mu.Lock()
	g.taken = false
	g.signal()
	g.mu.Unlock()
}

// run works on one claimed request and ends it, unless the attempt is
// abandoned.
func (s *Server) run(worker string, req *store.Request) {
	log := s.log.With("request_id", req.ID, "worker", worker, "attempt", req.Attempts)
	log.Info("request claimed", "kind", req.Kind)
	// Long-polling GETs wait for this; the end (or abandon) wakes them,
	// after the outcome is stored.
	s.waiters.started(req.ID)
	defer s.waiters.stopped(req.ID)
	ctx, cancel := context.WithTimeout(s.workCtx, s.cfg.ProcessTimeout)
	defer cancel()
	// A DELETE of the request stops the attempt (attempts.stop): what it
	// would fetch or compute is no longer wanted.
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	defer s.attempts.add(req.ID, stop)()

	// Heartbeat until the attempt ends; losing the lease cancels the work.
	hbDone := make(chan struct{})
	hbStopped := make(chan struct{})
	var leaseLost bool
	go func() {
		defer close(hbStopped)
		t := time.NewTicker(s.cfg.Lease / 3)
		defer t.Stop()
		for {
			select {
			case <-hbDone:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				err := s.cfg.Store.Heartbeat(ctx, req.ID, worker, s.cfg.Now().Add(s.cfg.Lease))
				if errors.Is(err, store.ErrLeaseLost) {
					leaseLost = true
					cancel()
					return
				}
				if err != nil && ctx.Err() == nil {
					log.Warn("heartbeat failed", "err", err)
				}
			}
		}
	}()

	result, problem, err := s.attempt(ctx, req)
	close(hbDone)
	<-hbStopped

	switch {
	case errors.Is(context.Cause(ctx), errDeleted):
		log.Info("request deleted while processing; the attempt was stopped and nothing of it kept")
		return
	case leaseLost && s.deleted(req):
		log.Info("request deleted while processing; the attempt's outcome was discarded")
		return
	case leaseLost:
		log.Warn("lease lost; another worker owns the request now")
		return
	case s.workCtx.Err() != nil:
		s.release(req, worker, log)
		return
	case errors.Is(err, errAbandon):
		log.Warn("attempt abandoned; the request will be retried alone when its lease expires")
		return
	}
	// The outcome is written even while closing, with a bounded context.
	endCtx, endCancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer endCancel()
	now := s.cfg.Now()
	// The outcome is logged only once it is stored: a line saying
	// "completed" for a request whose write failed (and that will be
	// re-claimed) would misreport it.
	if problem != nil {
		problem.Instance = "/v1/requests/" + req.ID
		b, _ := json.Marshal(problem)
		err = s.cfg.Store.Fail(endCtx, req.ID, worker, b, now)
	} else {
		err = s.cfg.Store.Complete(endCtx, req.ID, worker, resultRecord(result), now)
	}
	switch {
	case errors.Is(err, store.ErrLeaseLost) && s.deleted(req):
		// Deleted (here or by another replica) while the attempt ran.
		log.Info("request deleted while processing; the attempt's outcome was discarded")
	case err != nil:
		log.Error("ending the request failed; it will be re-claimed", "err", err)
	case problem != nil:
		log.Info("request failed", "problem", problem.Code(), "detail", problem.Detail)
		s.metrics.ended.WithLabelValues(req.Kind, acds.StatusFailed, problem.Code()).Inc()
	default:
		log.Info("request completed", "output_digest", result.OutputDigest)
		s.metrics.ended.WithLabelValues(req.Kind, acds.StatusCompleted, "").Inc()
	}
}

// attempt runs one attempt. It returns a result, or a problem that ends the
// request as failed, or errAbandon. A panic in a seam abandons the attempt
// like a crashed worker would.
func (s *Server) attempt(ctx context.Context, req *store.Request) (res *acds.Result, prob *acds.Problem, err error) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("worker panic; abandoning the attempt", "request_id", req.ID, "panic", fmt.Sprint(v))
			res, prob, err = nil, nil, errAbandon
		}
	}()
	switch req.Kind {
	case acds.KindProcess:
		return s.attemptProcess(ctx, req)
	case acds.KindFetchAndAttest:
		return s.attemptFetch(ctx, req)
	}
	return nil, acds.NewProblem(acds.ProblemInternal, "unknown request kind "+req.Kind), nil
}

func (s *Server) attemptProcess(ctx context.Context, req *store.Request) (*acds.Result, *acds.Problem, error) {
	var in processInput
	if err := json.Unmarshal(req.Input, &in); err != nil {
		return nil, acds.NewProblem(acds.ProblemInternal, "the stored input is unreadable"), nil
	}
	if p := s.missingParts(false); p != nil {
		return nil, p, nil
	}
	data := in.bundle()
	claims := attestation.Claims{Source: attestation.Source{Kind: acds.SourceRaw, InputDigest: sha256Digest(data)}, Query: queryClaim(in.Query)}
	return s.finish(ctx, req.ID, in.OutputFormat, data, acds.SourceRaw, claims, nil)
}

func (s *Server) attemptFetch(ctx context.Context, req *store.Request) (*acds.Result, *acds.Problem, error) {
	var in fetchInput
	if err := json.Unmarshal(req.Input, &in); err != nil {
		return nil, acds.NewProblem(acds.ProblemInternal, "the stored input is unreadable"), nil
	}
	if p := s.missingParts(true); p != nil {
		return nil, p, nil
	}
	if len(req.Sealed) == 0 {
		return nil, acds.NewProblem(acds.ProblemUnavailable,
			"the portal credentials are no longer available (erased after the credential time limit, or not kept because fetching was unavailable when the request was accepted); submit a new request"), nil
	}
	plain, err := s.cfg.Enclave.Unseal(req.Sealed, []byte(req.ID))
	if errors.Is(err, attestation.ErrSealedByOtherKey) {
		return nil, acds.NewProblem(acds.ProblemUnavailable,
			"the portal credentials were sealed under an enclave key this server no longer holds (an enclave without persistent sealing, such as TDX, that restarted since, or another replica or installation); submit a new request"), nil
	}
	if err != nil {
		return nil, acds.NewProblem(acds.ProblemInternal, "the sealed credentials could not be unsealed by this enclave (sealed by another installation, or altered); submit a new request"), nil
	}
	creds, err := unsealCredentials(plain)
	clear(plain)
	if err != nil {
		return nil, acds.NewProblem(acds.ProblemInternal, "the sealed credentials are unreadable"), nil
	}
	fetched, err := s.cfg.Fetcher.Fetch(ctx, portal.Request{SystemType: in.SystemType, PortalURL: in.PortalURL, RecordID: in.RecordID, Credentials: creds})
	if err != nil {
		if s.workCtx.Err() != nil {
			return nil, nil, errAbandon
		}
		detail := portal.Redact(err.Error(), creds.Username, creds.Password)
		if code := portal.ProblemCode(err); code != acds.ProblemInternal {
			s.metrics.fetchOutcome(in.SystemType, code, 0)
			return nil, acds.NewProblem(code, detail), nil
		}
		// An error of none of portal's classes (a Fetcher of the
		// embedder's own) is the portal's failure.
		s.metrics.fetchOutcome(in.SystemType, acds.ProblemPortalUnavailable, 0)
		return nil, acds.NewProblem(acds.ProblemPortalUnavailable, "fetching the record from the portal failed: "+detail), nil
	}
	s.metrics.fetchOutcome(in.SystemType, "ok", len(fetched.Sessions))
	claims, statements := mpctlsClaims(fetched)
	claims.Query = queryClaim(in.Query) // query.go
	return s.finish(ctx, req.ID, in.OutputFormat, fetched.FHIR, fetched.Host, claims, statements)
}

// mpctlsClaims are the claims of a fetched record, with the notary
// statements in their order: one session for each notarized session, with
// its own host and the request line it carried — its first FHIR API
// request (one of r.RequestLines), else its first request (discovery, a
// token or a login page), and the record's first request when the
// Fetcher does not say — and the record's coverage.
func mpctlsClaims(r *portal.Result) (attestation.Claims, [][]byte) {
	c := attestation.Claims{Source: attestation.Source{Kind: acds.SourceMPCTLS}, Coverage: r.Coverage}
	record := "" // the record's request: the first FHIR API one
	if len(r.RequestLines) > 0 {
		record = r.RequestLines[0]
	}
	statements := make([][]byte, 0, len(r.Sessions))
	for _, ps := range r.Sessions {
		sess := attestation.Session{Host: ps.Host, RequestLine: record}
		if len(ps.RequestLines) > 0 {
			sess.RequestLine = ps.RequestLines[0]
			if j := slices.IndexFunc(ps.RequestLines, func(l string) bool { return slices.Contains(r.RequestLines, l) }); j >= 0 {
				sess.RequestLine = ps.RequestLines[j]
			}
		}
		c.Source.Sessions = append(c.Source.Sessions, sess)
		statements = append(statements, ps.Statement)
	}
	return c, statements
}

// sealedCredentials is the encoding of the credentials the enclave seals
// while a fetch is queued. portal.Credentials marshal as a placeholder on
// purpose, so this private encoding, the one rows have always been
// sealed with, carries them.
type sealedCredentials struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// sealCredentials encodes c for sealing; the caller clears the result.
func sealCredentials(c portal.Credentials) []byte {
	b, _ := json.Marshal(sealedCredentials{Username: c.Username, Password: c.Password})
	return b
}

// unsealCredentials decodes what sealCredentials encoded.
func unsealCredentials(b []byte) (portal.Credentials, error) {
	var c sealedCredentials
	if err := json.Unmarshal(b, &c); err != nil {
		return portal.Credentials{}, err
	}
	return portal.Credentials{Username: c.Username, Password: c.Password}, nil
}

// missingParts names the seams a request needs that this server lacks.
func (s *Server) missingParts(fetch bool) *acds.Problem {
	var missing []string
	if fetch && s.cfg.Fetcher == nil {
		missing = append(missing, "portal fetching (MPC-TLS)")
	}
	if s.cfg.Pipeline == nil {
		missing = append(missing, "FHIR processing")
	}
	if s.cfg.Enclave == nil {
		missing = append(missing, "the enclave (attestation)")
	}
	if len(missing) == 0 {
		return nil
	}
	return acds.NewProblem(acds.ProblemUnavailable, "this server cannot complete the request: not configured on this server: "+strings.Join(missing, ", "))
}

// finish runs the pipeline and the enclave over input and builds the result.
func (s *Server) finish(ctx context.Context, id, format string, input []byte, source string, claims attestation.Claims, statements [][]byte) (*acds.Result, *acds.Problem, error) {
	now := s.cfg.Now()
	opts := fhir.Options{Format: format, Source: source, Measurement: s.cfg.Enclave.Measurement(), Now: now}
	if claims.Query != nil {
		opts.Query = claims.Query.Expression
	}
	out, err := s.cfg.Pipeline.Process(ctx, input, opts)
	if err != nil {
		var inv *fhir.InvalidError
		if errors.As(err, &inv) {
			return nil, invalidFHIRProblem(inv), nil
		}
		if p := queryFailed(err); p != nil { // query.go
			return nil, p, nil
		}
		if s.workCtx.Err() != nil {
			return nil, nil, errAbandon
		}
		if ctx.Err() != nil {
			return nil, acds.NewProblem(acds.ProblemUnavailable, "processing timed out"), nil
		}
		s.log.Error("pipeline failed", "request_id", id, "err", err)
		return nil, acds.NewProblem(acds.ProblemInternal, "FHIR processing failed unexpectedly"), nil
	}
	claims.RequestID = id
	claims.OutputFormat = format
	claims.OutputDigest = out.Digest
	claims.IssuedAt = now
	entries, disclosureKey, err := commitEntries(format, out.JSON, out.Entries)
	if err != nil {
		s.log.Error("entry commitment failed", "request_id", id, "err", err)
		return nil, acds.NewProblem(acds.ProblemInternal, "FHIR processing failed unexpectedly"), nil
	}
	claims.Entries = entries
	if claims.Query != nil {
		q := *claims.Query
		q.RecordDigest = out.RecordDigest
		claims.Query = &q
	}
	bundle, err := s.cfg.Enclave.Attest(ctx, claims, statements)
	if err != nil {
		if s.workCtx.Err() != nil {
			return nil, nil, errAbandon
		}
		s.log.Error("attestation failed", "request_id", id, "err", err)
		return nil, acds.NewProblem(acds.ProblemUnavailable, "the enclave could not attest the output"), nil
	}
	return &acds.Result{
		OutputFormat: format, Output: out.JSON, OutputDigest: out.Digest,
		AttestationBundle: base64Std(bundle), DisclosureKey: disclosureKey, Coverage: claims.Coverage,
	}, nil, nil
}

// resultRecord is the stored JSON of r: an acds.Result object whose output
// member is r.Output byte for byte. It is assembled around the output
// instead of encoding it with encoding/json, which would scan and copy the
// output (megabytes for a large record) once more only to compact what
// the Pipeline already wrote as canonical JSON — and would change the
// digested bytes if it were not. The Pipeline contract (Output.JSON is
// JSON) is what makes the record valid; the three other members are
// encoded as JSON strings, as marshal would.
func resultRecord(r *acds.Result) []byte {
	format, _ := marshal(r.OutputFormat) // strings always encode
	digest, _ := marshal(r.OutputDigest)
	bundle, _ := marshal(r.AttestationBundle)
	const (
		f = `{"outputFormat":`
		o = `,"output":`
		d = `,"outputDigest":`
		a = `,"attestationBundle":`
	)
	b := make([]byte, 0, len(f)+len(format)+len(o)+len(r.Output)+len(d)+len(digest)+len(a)+len(bundle)+1)
	b = append(append(b, f...), format...)
	b = append(append(b, o...), r.Output...)
	b = append(append(b, d...), digest...)
	b = append(append(b, a...), bundle...)
	if r.DisclosureKey != "" {
		key, _ := marshal(r.DisclosureKey)
		b = append(append(b, `,"disclosureKey":`...), key...)
	}
	if r.Coverage != nil {
		cov, _ := json.Marshal(r.Coverage) // plain strings and numbers always encode
		b = append(append(b, `,"coverage":`...), cov...)
	}
	return append(b, '}')
}

// release gives back the lease of an attempt stopped because the server
// is closing, so that the request is claimable at once, and not a suspect.
func (s *Server) release(req *store.Request, worker string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.StoreTimeout)
	defer cancel()
	if err := s.cfg.Store.Release(ctx, req.ID, worker); err != nil && !errors.Is(err, store.ErrLeaseLost) {
		log.Warn("attempt abandoned; giving back its lease failed, the request will be retried alone when the lease expires", "err", err)
		return
	}
	log.Warn("attempt abandoned as the server closes; the request was given back")
}

// errDeleted is the cause that stops an attempt whose request was deleted.
var errDeleted = errors.New("the request was deleted")

// deleted reports whether req no longer exists: a lost lease then means
// that its owner deleted it, not that another worker took it over.
func (s *Server) deleted(req *store.Request) bool {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.StoreTimeout)
	defer cancel()
	_, err := s.cfg.Store.GetRequest(ctx, req.Owner, req.ID)
	return isNotFound(err)
}

// runningAttempts are the attempts local workers run, by request id, so
// that deleting a request stops its attempt. One request can have two
// local attempts for a moment (a lease that expired while its heartbeats
// failed, re-claimed by another local worker): each is kept until it ends.
type runningAttempts struct {
	mu sync.Mutex
	m  map[string][]*attemptStop
}

// attemptStop stops one attempt.
type attemptStop struct{ stop context.CancelCauseFunc }

// add records an attempt of request id; the function it returns forgets
// that attempt (and no other).
func (a *runningAttempts) add(id string, stop context.CancelCauseFunc) (remove func()) {
	e := &attemptStop{stop}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = make(map[string][]*attemptStop)
	}
	a.m[id] = append(a.m[id], e)
	return func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		rest := slices.DeleteFunc(a.m[id], func(x *attemptStop) bool { return x == e })
		if len(rest) == 0 {
			delete(a.m, id)
		} else {
			a.m[id] = rest
		}
	}
}

// stop stops every local attempt of request id.
func (a *runningAttempts) stop(id string) {
	a.mu.Lock()
	es := slices.Clone(a.m[id])
	a.mu.Unlock()
	for _, e := range es {
		e.stop(errDeleted)
	}
}
