// Package client is a typed Go client for the ACDS v1 API.
//
// Every method takes a context first and returns the wire types of package
// acds. A response that is not a success is returned as an *acds.Problem,
// reachable with errors.As; its Code method gives the stable problem code.
// Requests answered 429 (rate-limited) or 503 (unavailable) are retried with
// bounded, jittered exponential backoff that honours Retry-After, and never
// once the context has ended. Wait follows a request until it completes
// or fails: it long-polls (GET /v1/requests/{id}?wait=N, the server answers
// as soon as the request ends) and falls back to polling servers that do
// not support it. Events follows a request as server-sent events
// (GET /v1/requests/{id}/events), one record per change.
//
//	c, _ := client.New("http://127.0.0.1:8080", nil)
//	sess, _ := c.Anon(ctx, "")
//	c = c.WithToken(sess.Token)
//	acc, _ := c.Process(ctx, acds.ProcessRequest{Data: fhirJSON, OutputFormat: acds.OutputFHIRR4})
//	rec, _ := c.Wait(ctx, acc.RequestID)
//
// The client never imports the server and never logs; the bearer token
// never appears in its errors.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acds-project/acds"
)

// Options configure a Client. The zero value (or nil) is useful.
type Options struct {
	// HTTPClient sends the requests. Nil means a client with a 2 minute
	// overall timeout per attempt.
	HTTPClient *http.Client
	// Token is the bearer token sent with every request ("" sends none).
	Token string
	// MaxRetries is how many times a 429 or 503 answer is retried. Zero
	// means 4; negative means never.
	MaxRetries int
	// MinBackoff and MaxBackoff bound the jittered exponential backoff
	// used when the server gives no Retry-After. Zero means 200 ms and 10 s.
	MinBackoff, MaxBackoff time.Duration
	// MaxRetryAfter is the longest Retry-After the client waits for; a
	// longer one ends the retries with the problem. Zero means 60 s.
	MaxRetryAfter time.Duration
	// LongPoll is how long each of Wait's requests asks the server to hold
	// the answer while the request is processing (the wait parameter,
	// whole seconds from 1 to 30). Zero means 25 s, or less when
	// HTTPClient has a shorter Timeout (at most half of it); negative turns
	// long-polling off, so that Wait polls.
	LongPoll time.Duration
	// PollInterval is Wait's first pause between polls when it polls (long
	// polling off or unsupported by the server) or when the server answers
	// a long-poll early; it doubles up to 1 s (or PollInterval when that is
	// longer). Zero means 250 ms.
	PollInterval time.Duration
	// UserAgent is sent as User-Agent. Zero means "acds-go-client/" + acds.Version.
	UserAgent string
	// EventIdleTimeout is how long Events waits for anything (an event or
	// the server's keep-alive comment, every 15 s by default) before it
	// drops the stream and reopens it. Zero means 45 s.
	EventIdleTimeout time.Duration
}

// Client calls an ACDS server. It is safe for concurrent use.
type Client struct {
	base *url.URL
	opt  Options
	hc   *http.Client
}

// New returns a client for the server at baseURL, e.g.
// "http://127.0.0.1:8080" or "https://example.org/acds" when the API is
// mounted under a prefix.
func New(baseURL string, opts *Options) (*Client, error) {
	u, err := url.Parse(strings.TrimSuffix(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: base URL must be an absolute http(s) URL")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MaxRetries == 0 {
		o.MaxRetries = 4
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 200 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 10 * time.Second
	}
	if o.MaxRetryAfter <= 0 {
		o.MaxRetryAfter = time.Minute
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 250 * time.Millisecond
	}
	if o.UserAgent == "" {
		o.UserAgent = "acds-go-client/" + acds.Version
	}
	hc := o.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 2 * time.Minute}
	}
	return &Client{base: u, opt: o, hc: hc}, nil
}

// WithToken returns a copy of c that sends token as its bearer token.
func (c *Client) WithToken(token string) *Client {
	cp := *c
	cp.opt.Token = token
	return &cp
}

// Anon starts an anonymous session (POST /v1/auth/anon). A non-empty
// passphrase (at least 12 characters) enables Recover.
func (c *Client) Anon(ctx context.Context, passphrase string) (*acds.Session, error) {
	var s acds.Session
	var body any
	if passphrase != "" {
		body = acds.AnonRequest{Passphrase: passphrase}
	}
	if err := c.do(ctx, http.MethodPost, "/v1/auth/anon", nil, body, http.StatusCreated, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Recover issues a new token for a pseudonym (POST /v1/auth/recover).
func (c *Client) Recover(ctx context.Context, pseudonym, passphrase string) (*acds.Session, error) {
	return c.RecoverWith(ctx, acds.RecoverRequest{Pseudonym: pseudonym, Passphrase: passphrase})
}

// RecoverWith is Recover with the whole request, e.g. with RevokeOthers
// to revoke every other token of the pseudonym (a lost token may have been
// stolen).
func (c *Client) RecoverWith(ctx context.Context, r acds.RecoverRequest) (*acds.Session, error) {
	var s acds.Session
	if err := c.do(ctx, http.MethodPost, "/v1/auth/recover", nil, r, http.StatusOK, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Revoke ends the client's token (POST /v1/auth/revoke): the server
// refuses it from then on.
func (c *Client) Revoke(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, "/v1/auth/revoke", nil, nil, http.StatusNoContent, nil)
}

// FetchAndAttest asks the server to fetch a record from a portal and
// attest it (POST /v1/fetch-and-attest).
func (c *Client) FetchAndAttest(ctx context.Context, r acds.FetchAndAttestRequest) (*acds.Accepted, error) {
	var a acds.Accepted
	if err := c.do(ctx, http.MethodPost, "/v1/fetch-and-attest", nil, r, http.StatusAccepted, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// Process submits a FHIR Bundle for processing (POST /v1/process).
func (c *Client) Process(ctx context.Context, r acds.ProcessRequest) (*acds.Accepted, error) {
	var a acds.Accepted
	if err := c.do(ctx, http.MethodPost, "/v1/process", nil, r, http.StatusAccepted, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// Request returns one of the caller's requests (GET /v1/requests/{id}).
func (c *Client) Request(ctx context.Context, id string) (*acds.Request, error) {
	var r acds.Request
	if err := c.do(ctx, http.MethodGet, "/v1/requests/"+url.PathEscape(id), nil, nil, http.StatusOK, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Requests returns a page of the caller's requests, newest first
// (GET /v1/requests). cursor "" starts at the newest; limit 0 uses the
// server's default. A page may hold fewer than limit requests even when
// more follow (a page of large records ends once it holds the server's
// page bound of them): page on while NextCursor is not empty.
func (c *Client) Requests(ctx context.Context, cursor string, limit int) (*acds.RequestList, error) {
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var l acds.RequestList
	if err := c.do(ctx, http.MethodGet, "/v1/requests", q, nil, http.StatusOK, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// DeleteRequest erases a request with its input, output and proofs
// (DELETE /v1/requests/{id}).
func (c *Client) DeleteRequest(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/requests/"+url.PathEscape(id), nil, nil, http.StatusNoContent, nil)
}

// Verify asks the server to verify an attestation bundle (POST /v1/verify).
// For a verification that trusts nothing the server says, use package
// verify or `acds verify` offline instead.
func (c *Client) Verify(ctx context.Context, r acds.VerifyRequest) (*acds.VerifyResponse, error) {
	var v acds.VerifyResponse
	if err := c.do(ctx, http.MethodPost, "/v1/verify", nil, r, http.StatusOK, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// Health returns the server's health (GET /v1/health), also when the
// server reports itself degraded (503 with a health document whose status
// is "degraded", e.g. its store does not answer), which is returned at
// once, without retries: check Health.Status. Other answers are errors
// (an *acds.Problem for an HTTP error), retried as every call is.
func (c *Client) Health(ctx context.Context) (*acds.Health, error) {
	var h acds.Health
	if err := c.doAccepting(ctx, http.MethodGet, "/v1/health", nil, nil, &healthDoc{&h}, http.StatusOK, http.StatusServiceUnavailable); err != nil {
		return nil, err
	}
	return &h, nil
}

// healthDoc decodes a health document into h, refusing JSON without a
// status (a proxy's error page, a problem served as application/json).
type healthDoc struct{ h *acds.Health }

func (d *healthDoc) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, d.h); err != nil {
		return err
	}
	if d.h.Status == "" {
		return errors.New("not a health document")
	}
	return nil
}

// OpenAPI returns the server's OpenAPI 3.0.3 document (GET /v1/openapi.json).
func (c *Client) OpenAPI(ctx context.Context) ([]byte, error) {
	var raw json.RawMessage
	if err := c.do(ctx, http.MethodGet, "/v1/openapi.json", nil, nil, http.StatusOK, &raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// Attestation returns the enclave's boot evidence (GET /v1/attestation).
func (c *Client) Attestation(ctx context.Context) (*acds.Attestation, error) {
	var a acds.Attestation
	if err := c.do(ctx, http.MethodGet, "/v1/attestation", nil, nil, http.StatusOK, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// maxPollInterval caps the growth of Wait's pause between polls.
const maxPollInterval = time.Second

// Wait follows a request until it has completed or failed and returns its
// record. When the request failed, Wait returns the record together with
// its problem as the error (rec.Err()): errors.As reaches it as
// *acds.Problem and errors.Is matches its class (acds.ErrPortalAuthFailed,
// …). It returns ctx's error (and no record) when ctx ends first, and
// sends nothing after that.
//
// Wait long-polls: each GET /v1/requests/{id}?wait=N is held by the server
// until the request ends or N seconds pass (see Options.LongPoll), so a
// completion is seen as soon as the server stores it and the record (with
// its output) is downloaded once. When the server refuses the wait
// parameter with 400 (a server older than long-polling), Wait polls
// instead, every PollInterval, doubling up to 1 s. When a long-poll comes
// back early still processing (a server closing, holding too many waiting
// requests, or ignoring the parameter), Wait pauses the same way before it
// asks again, so it never spins.
func (c *Client) Wait(ctx context.Context, id string) (*acds.Request, error) {
	path := "/v1/requests/" + url.PathEscape(id)
	hold := c.longPollSeconds()
	interval := c.opt.PollInterval
	for {
		var q url.Values
		if hold > 0 {
			q = url.Values{"wait": {strconv.Itoa(hold)}}
		}
		start := time.Now()
		var r acds.Request
		err := c.do(ctx, http.MethodGet, path, q, nil, http.StatusOK, &r)
		if err == nil && r.Done() {
			return &r, r.Err()
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var p *acds.Problem
		if hold > 0 && errors.As(err, &p) && p.Status == http.StatusBadRequest {
			hold = 0 // the server does not know wait: poll from now on
			continue
		}
		if err != nil {
			return nil, err
		}
		if hold > 0 && time.Since(start) >= time.Duration(hold)*time.Second*9/10 {
			interval = c.opt.PollInterval
			continue // held for the whole wait: ask again at once
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		interval = min(2*interval, max(maxPollInterval, c.opt.PollInterval))
	}
}

// longPollSeconds is the wait parameter Wait sends, 0 for none.
func (c *Client) longPollSeconds() int {
	d := c.opt.LongPoll
	if d < 0 {
		return 0
	}
	if d == 0 {
		d = 25 * time.Second
		if c.hc.Timeout > 0 {
			d = min(d, c.hc.Timeout/2)
		}
	}
	return int(min(max(d/time.Second, 0), 30))
}

// maxErrorBody caps how much of an error response is read.
const maxErrorBody = 64 << 10

// do sends one API call with retries on 429/503 and decodes a want
// response into out (when out is not nil).
// url is the address of path (which starts with /v1/) under the base URL,
// with query q.
func (c *Client) url(path string, q url.Values) string {
	u := *c.base
	u.Path = c.base.Path + path
	u.RawPath = ""
	if c.base.RawPath != "" || strings.Contains(path, "%") {
		u.RawPath = c.base.EscapedPath() + path
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func (c *Client) do(ctx context.Context, method, path string, q url.Values, body any, want int, out any) error {
	return c.doAccepting(ctx, method, path, q, body, out, want)
}

// doAccepting is do for a call whose answer may come with any of the
// statuses in want (see once).
func (c *Client) doAccepting(ctx context.Context, method, path string, q url.Values, body any, out any, want ...int) error {
	var payload []byte
	if body != nil {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // keep embedded FHIR bytes as they are
		if err := enc.Encode(body); err != nil {
			return fmt.Errorf("client: encoding the request: %w", err)
		}
		payload = buf.Bytes()
	}
	u := c.url(path, q)
	for attempt := 0; ; attempt++ {
		err := c.once(ctx, method, u, payload, out, want...)
		var p *acds.Problem
		if !errors.As(err, &p) || (p.Status != http.StatusTooManyRequests && p.Status != http.StatusServiceUnavailable) ||
			c.opt.MaxRetries < 0 || attempt >= c.opt.MaxRetries {
			return err
		}
		wait := c.backoff(attempt)
		if p.RetryAfter > 0 {
			ra := time.Duration(p.RetryAfter) * time.Second
			if ra > c.opt.MaxRetryAfter {
				return err
			}
			// Honour the server's hint, plus a little jitter so clients
			// told the same second do not return in lockstep.
			wait = ra + time.Duration(rand.Int64N(int64(c.opt.MinBackoff)+1))
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return err // the context would end before the retry
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// backoff is full-jitter exponential backoff: a random duration in
// [MinBackoff, min(MaxBackoff, MinBackoff·2^attempt)].
func (c *Client) backoff(attempt int) time.Duration {
	ceil := c.opt.MinBackoff << min(attempt, 20)
	if ceil > c.opt.MaxBackoff || ceil <= 0 {
		ceil = c.opt.MaxBackoff
	}
	span := int64(ceil - c.opt.MinBackoff)
	if span <= 0 {
		return c.opt.MinBackoff
	}
	return c.opt.MinBackoff + time.Duration(rand.Int64N(span+1))
}

func (c *Client) once(ctx context.Context, method, u string, payload []byte, out any, want ...int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	req.Header.Set("User-Agent", c.opt.UserAgent)
	if c.opt.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.opt.Token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("client: %s %s: %w", method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	if !slices.Contains(want, resp.StatusCode) {
		return problemFrom(resp)
	}
	if resp.StatusCode >= 400 {
		// An error status the call expects a document with (a degraded
		// health): only the service's own JSON that decodes as that
		// document is one; a problem, or a proxy's page, is an error as
		// any other (and retried as one).
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" || out == nil || json.Unmarshal(b, out) != nil {
			return problemOf(resp, b)
		}
		return nil
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("client: decoding the %s %s response: %w", method, req.URL.Path, err)
	}
	return nil
}

// problemFrom turns an error response into an *acds.Problem. Bodies that
// are not problem documents (e.g. from a proxy) become a problem with the
// code matching the status and a capped excerpt as detail.
func problemFrom(resp *http.Response) *acds.Problem {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	return problemOf(resp, b)
}

// problemOf is problemFrom for a body already read.
func problemOf(resp *http.Response, b []byte) *acds.Problem {
	var p acds.Problem
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "application/problem+json" || mt == "application/json" {
		if err := json.Unmarshal(b, &p); err != nil || p.Type == "" {
			p = acds.Problem{}
		}
	}
	if p.Type == "" {
		p = *acds.NewProblem(codeForStatus(resp.StatusCode), excerpt(b))
	}
	p.Status = resp.StatusCode
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		// Capped at a day, so that absurd values cannot overflow a Duration.
		if n, err := strconv.Atoi(strings.TrimSpace(ra)); err == nil && n >= 0 {
			p.RetryAfter = min(n, 86400)
		} else if t, err := http.ParseTime(ra); err == nil {
			p.RetryAfter = min(max(int(time.Until(t).Seconds()+0.999), 1), 86400)
		}
	}
	return &p
}

func excerpt(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

func codeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return acds.ProblemInvalidRequest
	case http.StatusUnauthorized:
		return acds.ProblemUnauthorized
	case http.StatusNotFound:
		return acds.ProblemNotFound
	case http.StatusMethodNotAllowed:
		return acds.ProblemMethodNotAllowed
	case http.StatusRequestEntityTooLarge:
		return acds.ProblemPayloadTooLarge
	case http.StatusUnsupportedMediaType:
		return acds.ProblemUnsupportedMediaType
	case http.StatusTooManyRequests:
		return acds.ProblemRateLimited
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		return acds.ProblemUnavailable
	}
	return acds.ProblemInternal
}
