package server

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/fhir"
	"github.com/acds-project/acds/portal"
	"github.com/acds-project/acds/store"
)

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }

// Values of the health status (GET /v1/health): SPEC shows "healthy";
// "degraded" means the server answers but its store does not, so requests
// that need it answer 503 unavailable until it is back.
const (
	HealthHealthy  = "healthy"
	HealthDegraded = "degraded"
)

// storeRetryAfter is the Retry-After, in seconds, of an answer the store
// could not give.
const storeRetryAfter = 2

func (s *Server) storeFailed(w http.ResponseWriter, op string, err error) {
	s.log.Error("store operation failed", "op", op, "err", err)
	p := acds.NewProblem(acds.ProblemUnavailable, "the request store is unavailable; retry later")
	p.RetryAfter = storeRetryAfter
	writeProblem(w, p)
}

// acquireArgon bounds concurrent Argon2id computations (19 MiB each), so
// that bursts of anon/recover requests cannot exhaust memory. It returns
// false when the client went away while waiting (there is no one to answer).
func (s *Server) acquireArgon(r *http.Request) bool {
	select {
	case s.argon <- struct{}{}:
		return true
	case <-r.Context().Done():
		return false
	}
}

func (s *Server) releaseArgon() { <-s.argon }

// issueSession creates a session for pseudonym and returns its token.
func (s *Server) issueSession(r *http.Request, pseudonym string) (*acds.Session, error) {
	token, hash, err := newToken()
	if err != nil {
		return nil, err
	}
	key, err := sessionKey(pseudonym)
	if err != nil {
		return nil, err
	}
	now := s.cfg.Now()
	sess := store.Session{Pseudonym: key, TokenHash: hash, CreatedAt: now, ExpiresAt: now.Add(s.cfg.TokenLifetime)}
	if err := s.cfg.Store.CreateSession(r.Context(), sess); err != nil {
		return nil, fmt.Errorf("create session: %w", err)
	}
	return &acds.Session{Pseudonym: pseudonym, Token: token, ExpiresAt: sess.ExpiresAt.UTC()}, nil
}

func (s *Server) handleAnon(w http.ResponseWriter, r *http.Request) {
	var req acds.AnonRequest
	if p := decodeBody(w, r, s.cfg.MaxBody, &req, true); p != nil {
		writeProblem(w, p)
		return
	}
	if req.Passphrase != "" && len([]rune(req.Passphrase)) < acds.MinPassphraseLen {
		writeProblem(w, fieldProblem("passphrase", fmt.Sprintf("must be at least %d characters", acds.MinPassphraseLen)))
		return
	}
	pseudonym, err := newPseudonym()
	if err != nil {
		writeProblem(w, acds.NewProblem(acds.ProblemInternal, "no randomness"))
		return
	}
	if req.Passphrase != "" {
		if !s.acquireArgon(r) {
			return
		}
		enc, err := hashPassphrase(req.Passphrase)
		s.releaseArgon()
		if err != nil {
			writeProblem(w, acds.NewProblem(acds.ProblemInternal, "no randomness"))
			return
		}
		if err := s.cfg.Store.SetPassphrase(r.Context(), pseudonym, enc); err != nil {
			s.storeFailed(w, "set passphrase", err)
			return
		}
	}
	sess, err := s.issueSession(r, pseudonym)
	if err != nil {
		s.storeFailed(w, "create session", err)
		return
	}
	s.log.Info("session created", "pseudonym", pseudonym, "recoverable", req.Passphrase != "")
	writeJSON(w, http.StatusCreated, sess)
}

func (s *Server) handleRecover(w http.ResponseWriter, r *http.Request) {
	var req acds.RecoverRequest
	if p := decodeBody(w, r, s.cfg.MaxBody, &req, false); p != nil {
		writeProblem(w, p)
		return
	}
	var errs []acds.FieldError
	if req.Pseudonym == "" {
		errs = append(errs, acds.FieldError{Field: "pseudonym", Message: "required"})
	}
	if req.Passphrase == "" {
		errs = append(errs, acds.FieldError{Field: "passphrase", Message: "required"})
	}
	if len(errs) > 0 {
		p := acds.NewProblem(acds.ProblemInvalidRequest, "missing fields")
		p.Errors = errs
		writeProblem(w, p)
		return
	}
	denied := acds.NewProblem(acds.ProblemUnauthorized, "pseudonym and passphrase do not match")
	enc := dummyPassphraseHash
	known := false
	if validPseudonym(req.Pseudonym) {
		switch e, err := s.cfg.Store.Passphrase(r.Context(), req.Pseudonym); {
		case err == nil:
			enc, known = e, true
		case !isNotFound(err):
			s.storeFailed(w, "passphrase", err)
			return
		}
	}
	// Always run Argon2id, so unknown pseudonyms cost the same time.
	if !s.acquireArgon(r) {
		return
	}
	ok, err := checkPassphrase(req.Passphrase, enc)
	s.releaseArgon()
	if err != nil && known {
		s.log.Error("stored passphrase hash is malformed", "pseudonym", req.Pseudonym)
	}
	if !ok || !known {
		s.log.Info("recovery refused", "pseudonym_valid", validPseudonym(req.Pseudonym))
		writeProblem(w, denied)
		return
	}
	sess, err := s.issueSession(r, req.Pseudonym)
	if err != nil {
		s.storeFailed(w, "create session", err)
		return
	}
	revoked := 0
	if req.RevokeOthers {
		keep, _ := parseToken(sess.Token)
		n, err := s.cfg.Store.DeleteSessionsOf(r.Context(), req.Pseudonym, keep)
		if err != nil {
			// The new token works; the old ones could not be revoked, and
			// the caller must know rather than trust that they were.
			s.storeFailed(w, "revoke other sessions", err)
			return
		}
		s.sessions.forgetOwner(req.Pseudonym, keep)
		revoked = n
	}
	s.log.Info("session recovered", "pseudonym", req.Pseudonym, "revoked_others", revoked)
	writeJSON(w, http.StatusOK, sess)
}

// handleRevoke answers POST /v1/auth/revoke: the calling token stops
// working at once on this server and within sessionCacheTTL on replicas
// sharing the store. The body, if any, must be an empty JSON object.
func (s *Server) handleRevoke(w http.ResponseWriter, r *http.Request) {
	var req struct{}
	if p := decodeBody(w, r, s.cfg.MaxBody, &req, true); p != nil {
		writeProblem(w, p)
		return
	}
	hash := tokenHashFrom(r)
	err := s.cfg.Store.DeleteSession(r.Context(), hash)
	if err != nil && !isNotFound(err) { // not found: revoked concurrently, the goal holds
		s.storeFailed(w, "revoke session", err)
		return
	}
	s.sessions.forget(hash)
	s.log.Info("session revoked", "pseudonym", ownerFrom(r))
	w.WriteHeader(http.StatusNoContent)
}

// processInput is the stored input of a process request: the request body
// as received (SPEC §2.3). Rows stored before the wire followed SPEC name
// the Bundle "bundle"; they are still read, so nothing queued across an
// upgrade is lost.
type processInput struct {
	OutputFormat string          `json:"outputFormat"`
	Data         json.RawMessage `json:"data"`
	LegacyBundle json.RawMessage `json:"bundle,omitempty"`
	Query        string          `json:"query,omitempty"` // query.go
}

// bundle returns the submitted FHIR data.
func (in processInput) bundle() json.RawMessage {
	if len(in.Data) == 0 {
		return in.LegacyBundle
	}
	return in.Data
}

// fetchInput is the stored input of a fetch-and-attest request: the
// request without its credentials, which are sealed separately.
type fetchInput struct {
	SystemType   string `json:"systemType"`
	PortalURL    string `json:"portalUrl"`
	RecordID     string `json:"recordId"`
	OutputFormat string `json:"outputFormat"`
	Query        string `json:"query,omitempty"` // query.go
}

func unsupportedFormat(f string) *acds.Problem {
	p := acds.NewProblem(acds.ProblemUnsupportedOutputFormat,
		fmt.Sprintf("outputFormat %q is not supported; supported: %s", f, strings.Join(acds.SupportedOutputFormats(), ", ")))
	p.Errors = []acds.FieldError{{Field: "outputFormat", Message: "must be one of " + strings.Join(acds.SupportedOutputFormats(), ", ")}}
	return p
}

func isJSONObject(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c == '{'
	}
	return false
}

func (s *Server) handleProcess(w http.ResponseWriter, r *http.Request) {
	raw, p := readLimited(w, r, s.cfg.MaxProcessBody, false)
	if p != nil {
		writeProblem(w, p)
		return
	}
	// A checker that refuses all malformed JSON (FHIRPipeline's) is left
	// the syntax of the data, the bulk of the body, which it decodes
	// anyway: until it accepts the data, every refusal answers with the
	// problem the strict decoding of the whole body finds first, if any,
	// so the answers are those of checking everything up front.
	checker, _ := s.cfg.Pipeline.(Checker)
	_, unchecked := checker.(syntaxChecker)
	strictProblem := func() *acds.Problem {
		if !unchecked {
			return nil
		}
		return decodeProcessRequest(raw, new(acds.ProcessRequest))
	}
	refuse := func(p *acds.Problem) {
		if sp := strictProblem(); sp != nil {
			p = sp
		}
		writeProblem(w, p)
	}
	var req acds.ProcessRequest
	if p := decodeProcessRequestWith(raw, &req, unchecked); p != nil {
		refuse(p)
		return
	}
	var errs []acds.FieldError
	if len(req.Data) == 0 || string(req.Data) == "null" {
		errs = append(errs, acds.FieldError{Field: "data", Message: "required"})
	} else if !isJSONObject(req.Data) {
		errs = append(errs, acds.FieldError{Field: "data", Message: "must be a JSON object (a FHIR Bundle or resource)"})
	}
	if req.OutputFormat == "" {
		errs = append(errs, acds.FieldError{Field: "outputFormat", Message: "required"})
	}
	if len(errs) > 0 {
		p := acds.NewProblem(acds.ProblemInvalidRequest, "invalid fields")
		p.Errors = errs
		refuse(p)
		return
	}
	if p := outputProblem(req.OutputFormat, req.Query); p != nil {
		refuse(p)
		return
	}
	// A request bound to fail is never accepted: without a pipeline or an
	// enclave nothing could process it.
	if p := s.missingParts(false); p != nil {
		refuse(p)
		return
	}
	// The input is checked for the format asked (an IPS needs a Patient).
	if checker != nil {
		if err := checker.Check(r.Context(), req.Data, req.OutputFormat); err != nil {
			var inv *fhir.InvalidError
			if errors.As(err, &inv) {
				refuse(invalidFHIRProblem(inv))
				return
			}
			if sp := strictProblem(); sp != nil {
				writeProblem(w, sp)
				return
			}
			s.log.Error("fhir check failed", "err", err)
			writeProblem(w, acds.NewProblem(acds.ProblemInternal, "checking the FHIR input failed"))
			return
		}
		unchecked = false // the checker accepted it: the data is well-formed JSON
	}
	if p := s.checkCallback(req.CallbackURL); p != nil { // webhooks.go
		refuse(p)
		return
	}
	// The body, already checked to be exactly a ProcessRequest, is stored
	// as is: no second encoding pass over a bundle of up to 32 MiB.
	s.accept(w, r, acds.KindProcess, raw, nil, "", req.CallbackURL)
}

// invalidFHIRProblem is the invalid-fhir problem of e, carrying its
// OperationOutcome.
func invalidFHIRProblem(e *fhir.InvalidError) *acds.Problem {
	n := e.Outcome.ErrorCount()
	detail := fmt.Sprintf("the FHIR input has errors: %d errors", n)
	if n == 1 {
		detail = "the FHIR input has errors: 1 error"
	}
	if e.NotR4 {
		detail += " (the content is not FHIR R4)"
	}
	p := acds.NewProblem(acds.ProblemInvalidFHIR, detail)
	if oo, err := e.Outcome.MarshalJSON(); err == nil {
		p.OperationOutcome = oo
	}
	return p
}

// accept stores a new request durably under a fresh id, then answers 202.
func (s *Server) accept(w http.ResponseWriter, r *http.Request, kind string, input, sealed []byte, message, callback string) {
	s.acceptWithID(w, r, newRequestID(), kind, input, sealed, message, callback)
}

// newRequestID returns a new request id: a UUID of version 7, which
// begins with the time in milliseconds (then a counter that keeps the ids
// of one millisecond in order, then 62 random bits). Ids made one after
// the other sort together, so each new request extends the store's
// indexes of ids at their end instead of landing on a random page of
// them: a batch of accepted requests writes fewer pages to the log (the
// store writer's CPU per request fell by about a fifth, measured with
// internal/testrig/loadtest/cmd/jsonfloor --durable), and a large table keeps its
// recent ids together in cache. The time an id shows is its request's
// createdAt, which the owner sees anyway; ids are looked up under their
// owner, never by the id alone.
func newRequestID() string {
	return uuid.Must(uuid.NewV7()).String()
}

func (s *Server) handleFetchAndAttest(w http.ResponseWriter, r *http.Request) {
	var req acds.FetchAndAttestRequest
	body, p := readBody(w, r, s.cfg.MaxBody, &req, false)
	if p != nil {
		writeProblem(w, p)
		return
	}
	var errs []acds.FieldError
	need := func(field, v string) {
		if strings.TrimSpace(v) == "" {
			errs = append(errs, acds.FieldError{Field: field, Message: "required"})
		}
	}
	need("systemType", req.SystemType)
	need("portalUrl", req.PortalURL)
	// recordId must be sent, but "" is a value: the patient of the login,
	// which the Fetcher's admission allows where the login names one.
	if !hasMember(body, "recordId") {
		errs = append(errs, acds.FieldError{Field: "recordId", Message: "required (\"\" for the patient of the login, where the system type has one)"})
	}
	need("username", req.Username)
	need("password", req.Password)
	if req.OutputFormat == "" {
		req.OutputFormat = acds.OutputFHIRR4 // SPEC §2.2 has no outputFormat: the extension defaults
	}
	if len(errs) > 0 {
		p := acds.NewProblem(acds.ProblemInvalidRequest, "invalid fields")
		p.Errors = errs
		writeProblem(w, p)
		return
	}
	if !slices.Contains(acds.SystemTypes(), req.SystemType) {
		p := acds.NewProblem(acds.ProblemUnsupportedSystemType,
			fmt.Sprintf("systemType %q is not supported; supported: %s", req.SystemType, strings.Join(acds.SystemTypes(), ", ")))
		p.Errors = []acds.FieldError{{Field: "systemType", Message: "must be one of " + strings.Join(acds.SystemTypes(), ", ")}}
		writeProblem(w, p)
		return
	}
	if p := outputProblem(req.OutputFormat, req.Query); p != nil {
		writeProblem(w, p)
		return
	}
	// A request bound to fail is never accepted: without the parts a
	// fetch needs, or when the Fetcher's own rules refuse it.
	if p := s.missingParts(true); p != nil {
		writeProblem(w, p)
		return
	}
	freq := portal.Request{SystemType: req.SystemType, PortalURL: req.PortalURL, RecordID: req.RecordID,
		Credentials: portal.Credentials{Username: req.Username, Password: req.Password}}
	if err := s.cfg.Fetcher.Admit(freq); err != nil {
		writeProblem(w, s.admitProblem(err, req.Username, req.Password))
		return
	}
	if p := s.checkCallback(req.CallbackURL); p != nil { // webhooks.go
		writeProblem(w, p)
		return
	}
	input, err := json.Marshal(fetchInput{SystemType: req.SystemType, PortalURL: req.PortalURL, RecordID: req.RecordID, OutputFormat: req.OutputFormat, Query: req.Query})
	if err != nil {
		writeProblem(w, acds.NewProblem(acds.ProblemInternal, "encoding the request failed"))
		return
	}
	// The credentials are sealed bound to the request id.
	id := newRequestID()
	creds := sealCredentials(freq.Credentials)
	sealed, err := s.cfg.Enclave.Seal(creds, []byte(id))
	clear(creds)
	if err != nil {
		s.log.Error("sealing credentials failed", "err", err)
		writeProblem(w, acds.NewProblem(acds.ProblemUnavailable, "the enclave could not seal the credentials"))
		return
	}
	s.acceptWithID(w, r, id, acds.KindFetchAndAttest, input, sealed, "fetching the record through MPC-TLS; poll the Location for the result", req.CallbackURL)
}

// outputProblem is the one rule for the output a request asks for, on
// both accepting endpoints: a supported format, and a query exactly when
// the format takes one (queryProblem, query.go).
func outputProblem(format, query string) *acds.Problem {
	if !slices.Contains(acds.SupportedOutputFormats(), format) {
		return unsupportedFormat(format)
	}
	return queryProblem(format, query)
}

// admitProblem is the answer to a request the Fetcher did not admit (see
// Fetcher.Admit): the problem code portal.ProblemCode gives the error,
// naming the field portal.ProblemField gives it.
func (s *Server) admitProblem(err error, secrets ...string) *acds.Problem {
	code := portal.ProblemCode(err)
	if code == acds.ProblemInternal {
		s.log.Error("admitting a fetch failed", "err", portal.Redact(err.Error(), secrets...))
		return acds.NewProblem(acds.ProblemInternal, "checking the request failed")
	}
	detail := portal.Redact(err.Error(), secrets...)
	field := portal.ProblemField(err)
	for _, e := range []error{portal.ErrInvalidRecordID, portal.ErrRecordIDRequired} {
		if errors.Is(err, e) {
			detail = e.Error() // the rule, without the value
		}
	}
	p := acds.NewProblem(code, detail)
	if field != "" {
		p.Errors = []acds.FieldError{{Field: field, Message: detail}}
	}
	return p
}

// acceptWithID stores a new request durably (CreateRequest returns only
// once the row is on disk), wakes a worker, then answers 202.
func (s *Server) acceptWithID(w http.ResponseWriter, r *http.Request, id, kind string, input, sealed []byte, message, callback string) {
	now := s.cfg.Now()
	req := store.Request{
		ID: id, Owner: ownerFrom(r), Kind: kind, Status: acds.StatusProcessing,
		Input: input, Sealed: sealed, CreatedAt: now, UpdatedAt: now, Callback: callback,
	}
	if len(sealed) > 0 {
		req.Affinity = s.affinity() // only this enclave can unseal it
	}
	// Durability: the 202 below is written only after CreateRequest has
	// returned nil, and the stores return nil only once the row is on
	// stable storage (SQLite: the group commit holding it has fsynced the
	// WAL under synchronous=FULL; PostgreSQL: the COMMIT returned, its WAL
	// record flushed with the default synchronous_commit=on). A
	// crash after this point cannot lose the request.
	if !s.admitQueued(r.Context()) {
		writeProblem(w, queueFull())
		return
	}
	if err := s.cfg.Store.CreateRequest(r.Context(), req); err != nil {
		s.storeFailed(w, "create request", err)
		return
	}
	s.log.Info("request accepted", "request_id", id, "kind", kind, "bytes", len(input))
	select {
	case s.wake <- struct{}{}:
	default:
	}
	w.Header().Set("Location", locationFor(r, id))
	writeJSON(w, http.StatusAccepted, acds.Accepted{RequestID: id, Status: acds.StatusProcessing, Message: message})
}

// wireRequest converts a stored request to its wire record.
func wireRequest(r store.Request) (acds.Request, error) {
	out := acds.Request{
		RequestID: r.ID, Kind: r.Kind, Status: r.Status,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
	if !r.CompletedAt.IsZero() {
		t := r.CompletedAt.UTC()
		out.CompletedAt = &t
	}
	if !r.ErasedAt.IsZero() {
		t := r.ErasedAt.UTC()
		out.ErasedAt = &t
	}
	if r.Status == acds.StatusCompleted && len(r.Result) > 0 {
		var res acds.Result
		if err := json.Unmarshal(r.Result, &res); err != nil {
			return out, fmt.Errorf("stored result of %s: %w", r.ID, err)
		}
		out.Result = &res
	}
	if r.Status == acds.StatusFailed && len(r.Error) > 0 {
		var p acds.Problem
		if err := json.Unmarshal(r.Error, &p); err != nil {
			return out, fmt.Errorf("stored error of %s: %w", r.ID, err)
		}
		out.Error = &p
	}
	return out, nil
}

// retained sets out.RetainedUntil: when the retention sweep will erase an
// ended, not yet erased request (Config.Retention).
func (s *Server) retained(out *acds.Request) {
	if s.cfg.Retention > 0 && out.CompletedAt != nil && out.ErasedAt == nil {
		t := out.CompletedAt.Add(s.cfg.Retention)
		out.RetainedUntil = &t
	}
}

// handleGet answers GET /v1/requests/{id}; with ?wait=N it long-polls
// (see longPoll): the answer is held while the request is processing, for
// at most N seconds.
func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	wait, p := parseWait(r.URL.Query())
	if p != nil {
		writeProblem(w, p)
		return
	}
	id := r.PathValue("id")
	if uuid.Validate(id) != nil {
		writeProblem(w, acds.NewProblem(acds.ProblemNotFound, "no such request"))
		return
	}
	var req store.Request
	var err error
	if wait > 0 {
		req, err = s.longPoll(r.Context(), ownerFrom(r), id, wait)
		if r.Context().Err() != nil {
			return // the client is gone: no one to answer
		}
	} else {
		req, err = s.cfg.Store.GetRequest(r.Context(), ownerFrom(r), id)
	}
	if isNotFound(err) {
		writeProblem(w, acds.NewProblem(acds.ProblemNotFound, "no such request"))
		return
	}
	if err != nil {
		s.storeFailed(w, "get request", err)
		return
	}
	// A completed request's result is stored as its wire JSON (the worker
	// writes exactly the encoding of acds.Result), so it is sent as stored
	// instead of being decoded and encoded again, which for a large output
	// costs more than the rest of the GET. Encoding still checks that it is
	// valid JSON (an invalid one answers internal).
	var raw json.RawMessage
	if req.Status == acds.StatusCompleted && len(req.Result) > 0 {
		raw, req.Result = req.Result, nil
	}
	out, err := wireRequest(req)
	if err != nil {
		s.log.Error("stored request unreadable", "request_id", id, "err", err)
		writeProblem(w, acds.NewProblem(acds.ProblemInternal, "the stored request is unreadable"))
		return
	}
	s.retained(&out)
	if raw != nil {
		writeJSON(w, http.StatusOK, struct {
			acds.Request
			Result json.RawMessage `json:"result"` // shadows the embedded, empty Result
		}{out, raw})
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k := range q {
		if k != "limit" && k != "cursor" {
			writeProblem(w, fieldProblem(k, "unknown query parameter; known: limit, cursor"))
			return
		}
	}
	// A repeated parameter is refused, as parseWait does: something in
	// front of the server may have read the other value.
	if len(q["limit"]) > 1 {
		writeProblem(w, fieldProblem("limit", "must be one integer from 1 to 100; given more than once"))
		return
	}
	if len(q["cursor"]) > 1 {
		writeProblem(w, fieldProblem("cursor", "must be one cursor from a previous page; given more than once"))
		return
	}
	limit := 20
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			writeProblem(w, fieldProblem("limit", "must be an integer from 1 to 100"))
			return
		}
		limit = n
	}
	cursor := q.Get("cursor")
	if len(cursor) > 512 {
		writeProblem(w, fieldProblem("cursor", "not a cursor from a previous page"))
		return
	}
	items, next, err := s.cfg.Store.ListRequests(r.Context(), ownerFrom(r), store.Page{Cursor: cursor, Limit: limit, MaxBytes: s.cfg.MaxListBytes})
	if errors.Is(err, store.ErrInvalid) {
		writeProblem(w, fieldProblem("cursor", "not a cursor from a previous page"))
		return
	}
	if err != nil {
		s.storeFailed(w, "list requests", err)
		return
	}
	out := acds.RequestList{Items: make([]acds.Request, 0, len(items)), NextCursor: next}
	for _, it := range items {
		wr, err := wireRequest(it)
		if err != nil {
			s.log.Error("stored request unreadable", "request_id", it.ID, "err", err)
			writeProblem(w, acds.NewProblem(acds.ProblemInternal, "a stored request is unreadable"))
			return
		}
		s.retained(&wr)
		out.Items = append(out.Items, wr)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if uuid.Validate(id) != nil {
		writeProblem(w, acds.NewProblem(acds.ProblemNotFound, "no such request"))
		return
	}
	err := s.cfg.Store.DeleteRequest(r.Context(), ownerFrom(r), id)
	if isNotFound(err) {
		writeProblem(w, acds.NewProblem(acds.ProblemNotFound, "no such request"))
		return
	}
	if err != nil {
		s.storeFailed(w, "delete request", err)
		return
	}
	s.log.Info("request deleted", "request_id", id)
	s.attempts.stop(id) // a local worker running it stops; another replica's sees its lease lost
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleVerify(w http.ResponseWriter, r *http.Request) {
	var req acds.VerifyRequest
	if p := decodeBody(w, r, s.cfg.MaxProcessBody, &req, false); p != nil {
		writeProblem(w, p)
		return
	}
	if req.AttestationBundle == "" {
		writeProblem(w, fieldProblem("attestationBundle", "required"))
		return
	}
	bundle, err := attestation.ReadBundle([]byte(req.AttestationBundle))
	if err != nil || len(bundle) == 0 {
		writeProblem(w, fieldProblem("attestationBundle", "must be base64"))
		return
	}
	var output []byte
	if len(req.Output) > 0 && string(req.Output) != "null" {
		// The one rule of every verifier of an output: a pretty-printed or
		// re-encoded copy gives back the digested canonical bytes.
		b, err := acds.OutputBytes(req.Output)
		if err != nil {
			writeProblem(w, fieldProblem("output", "must be JSON"))
			return
		}
		output = b
	}
	if s.cfg.Verifier == nil {
		writeProblem(w, acds.NewProblem(acds.ProblemUnavailable, "verification is not available on this server (no verifier built in); use `acds verify` offline"))
		return
	}
	if len(req.Disclosure) > 0 && string(req.Disclosure) != "null" {
		s.verifyDisclosure(w, r, bundle, req.Disclosure, output != nil) // disclose.go
		return
	}
	res, err := s.cfg.Verifier.Verify(r.Context(), bundle, output)
	if errors.Is(err, ErrMalformedBundle) {
		writeProblem(w, fieldProblem("attestationBundle", notABundle(err)))
		return
	}
	if err != nil {
		s.log.Error("verification failed", "err", err)
		writeProblem(w, acds.NewProblem(acds.ProblemInternal, "verification failed unexpectedly"))
		return
	}
	if res.Details.Reasons == nil {
		res.Details.Reasons = []string{}
	}
	writeJSON(w, http.StatusOK, res)
}

// formatUptime renders d as "Hh MMm".
func formatUptime(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	m := int64(d / time.Minute)
	return fmt.Sprintf("%dh %02dm", m/60, m%60)
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	enclave := "none"
	if s.cfg.Enclave != nil {
		enclave = s.cfg.Enclave.Profile()
	}
	h := acds.Health{
		Status: HealthHealthy, Version: acds.Version, Enclave: enclave,
		Uptime: formatUptime(s.cfg.Now().Sub(s.started)),
	}
	if s.storeDown(r.Context()) {
		// The same shape, so that a client reading SPEC's fields still
		// can; the status code and Retry-After tell a load balancer.
		h.Status = HealthDegraded
		w.Header().Set("Retry-After", strconv.Itoa(storeRetryAfter))
		writeJSON(w, http.StatusServiceUnavailable, h)
		return
	}
	writeJSON(w, http.StatusOK, h)
}

func (s *Server) handleAttestation(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Enclave == nil {
		writeProblem(w, acds.NewProblem(acds.ProblemUnavailable, "no enclave is configured on this server"))
		return
	}
	ev := s.cfg.Enclave.BootEvidence()
	if ev.Certificates == nil {
		ev.Certificates = [][]byte{}
	}
	writeJSON(w, http.StatusOK, ev)
}

func sha256Digest(b []byte) string {
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:])
}

func base64Std(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// notABundle is the message for bytes that are not an attestation bundle:
// the decoder's reason, once, without the prefixes each layer that wraps
// it adds ("malformed attestation bundle: not an attestation bundle:
// bundle: attestation: malformed input: cbor: …" says "not an attestation
// bundle: cbor: …").
func notABundle(err error) string {
	reason := err.Error()
	for trimmed := true; trimmed; {
		trimmed = false
		for _, p := range []string{ErrMalformedBundle.Error() + ": ", "not an attestation bundle: ", "bundle: ", attestation.ErrMalformed.Error() + ": "} {
			if r, ok := strings.CutPrefix(reason, p); ok {
				reason, trimmed = r, true
			}
		}
	}
	return "not an attestation bundle: " + reason
}
