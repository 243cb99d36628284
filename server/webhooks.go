package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/portal"
	"github.com/acds-project/acds/store"
	"github.com/acds-project/acds/webhook"
)

// Webhooks (DESIGN §10): a request accepted with callbackUrl has a
// delivery in the store from the moment it exists (the same transaction,
// store.Webhooks). Once the request has ended, a dispatcher of any
// replica claims the delivery (a lease: the store moves it forward so no
// other replica takes it meanwhile), POSTs webhook.Payload signed by the
// enclave's attested boot key (ACDS-Signature, a detached ES256 JWS) with
// an Idempotency-Key that is the same on every attempt, and ends the
// delivery on a 2xx answer; any other outcome is retried with jittered
// exponential backoff until WebhookOptions.RetryFor has passed since the
// request ended. Deliveries survive restarts (they are rows) and are at
// least once (a replica that dies after the POST and before ending the
// delivery sends it again after the lease). They never hold up a
// request: the dispatcher runs apart from the workers and reads only
// ended requests.
//
// The callback URL is checked at acceptance by the portal SSRF guard
// (https only, no user information, no literal private, loopback, link-
// local or metadata address) and the same guard checks every address the
// dispatcher connects to, so a name that resolves to a refused address is
// refused at connect time; redirects are not followed.

// WebhookOptions configure webhook deliveries. The zero value is useful.
type WebhookOptions struct {
	// Guard checks callback URLs at acceptance and the addresses
	// deliveries connect to. Zero value: portal.Guard{} (https, public
	// addresses only).
	Guard portal.Guard
	// TLS is the client TLS configuration of deliveries (e.g. RootCAs for
	// a receiver with a private CA). Nil: the system roots.
	TLS *tls.Config
	// RetryFor is how long after the request ended a delivery is retried.
	// Zero means 24 h.
	RetryFor time.Duration
	// MinBackoff and MaxBackoff bound the jittered exponential backoff
	// between attempts. Zero means 1 s and 10 min.
	MinBackoff, MaxBackoff time.Duration
	// Timeout bounds one attempt (connect, TLS, request and answer). Zero
	// means 10 s.
	Timeout time.Duration
	// Poll is how often the dispatcher looks for due deliveries. Zero
	// means 1 s.
	Poll time.Duration
	// Concurrency bounds the deliveries in flight. Zero means 8.
	Concurrency int
}

func (o WebhookOptions) withDefaults() WebhookOptions {
	if o.RetryFor <= 0 {
		o.RetryFor = 24 * time.Hour
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 10 * time.Minute
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = o.MinBackoff
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 8
	}
	return o
}

// jwsSigner is what deliveries need of the Enclave: signing a JWS signing
// input with the attested boot key, and that key. The Enclave of
// AttestationEnclave has both.
type jwsSigner interface {
	SignJWS(signingInput []byte) ([]byte, error)
	SigningKey() []byte
}

// SignJWS signs with the enclave's boot signing key (attestation.Enclave.SignJWS).
func (s attestationEnclave) SignJWS(signingInput []byte) ([]byte, error) {
	return s.e.SignJWS(signingInput)
}

// SigningKey is the SubjectPublicKeyInfo of the boot signing key.
func (s attestationEnclave) SigningKey() []byte { return s.e.BootEvidence().SigningKey }

// webhooks returns the parts deliveries need, or ok false when this
// server cannot deliver (its store keeps no deliveries, or its enclave
// cannot sign).
func (s *Server) webhooks() (store.Webhooks, jwsSigner, bool) {
	raw, ok1 := s.st.Store.(store.Webhooks) // the configured Store, behind the deadline wrapper
	sg, ok2 := s.cfg.Enclave.(jwsSigner)
	return deadlineWebhooks{raw, s.st}, sg, ok1 && ok2
}

// checkCallback decides callbackUrl at acceptance: "" is none; otherwise
// the portal guard's URL rule (its problem code, on field callbackUrl),
// at most store.MaxCallbackLen bytes, and a server able to deliver.
func (s *Server) checkCallback(raw string) *acds.Problem {
	if raw == "" {
		return nil
	}
	if len(raw) > store.MaxCallbackLen {
		return fieldProblem("callbackUrl", fmt.Sprintf("longer than %d bytes", store.MaxCallbackLen))
	}
	if _, _, ok := s.webhooks(); !ok {
		return fieldProblem("callbackUrl", "this server does not deliver webhooks (its store or enclave cannot)")
	}
	if _, err := s.cfg.Webhooks.Guard.CheckURL(raw); err != nil {
		code := portal.ProblemCode(err) // forbidden-portal for a refused target
		if errors.Is(err, portal.ErrMalformedURL) {
			code = acds.ProblemInvalidRequest // as Admit decides a malformed portalUrl
		}
		msg := callbackMessage(err)
		p := acds.NewProblem(code, "callbackUrl: "+msg)
		p.Errors = []acds.FieldError{{Field: "callbackUrl", Message: msg}}
		return p
	}
	return nil
}

// callbackMessage words a guard error for a callback URL: the guard's own
// text speaks of a "forbidden portal", which misleads a client whose
// portalUrl is fine. It never quotes the URL (user information may hold
// a password), only the refused host.
func callbackMessage(err error) string {
	var fe *portal.ForbiddenError
	var ue *portal.URLError
	switch {
	case errors.As(err, &fe) && strings.HasPrefix(fe.Reason, "scheme "):
		return "the URL's " + fe.Reason // scheme "http" is not allowed (https only)
	case errors.As(err, &fe):
		kind := "address"
		if _, aerr := portal.ParseHostAddr(fe.Target); aerr != nil {
			kind = "host"
		}
		return fmt.Sprintf("the %s %s is not allowed for callbacks (%s; loopback, private, link-local and metadata addresses are refused)", kind, fe.Target, fe.Reason)
	case errors.As(err, &ue):
		return "not a valid callback URL: " + ue.Reason
	}
	return err.Error()
}

// startWebhooks starts the dispatcher when this server can deliver.
func (s *Server) startWebhooks() {
	ws, sg, ok := s.webhooks()
	if !ok {
		return
	}
	o := s.cfg.Webhooks.withDefaults()
	tr := &http.Transport{
		DialContext:           o.Guard.NewDialer().DialContext,
		TLSClientConfig:       o.TLS,
		TLSHandshakeTimeout:   o.Timeout,
		ResponseHeaderTimeout: o.Timeout,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       time.Minute,
		ForceAttemptHTTP2:     true,
	}
	hc := &http.Client{Transport: tr, Timeout: o.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	d := &dispatcher{s: s, ws: ws, sg: sg, o: o, hc: hc, sem: make(chan struct{}, o.Concurrency)}
	s.wg.Add(1)
	go d.run()
}

type dispatcher struct {
	s   *Server
	ws  store.Webhooks
	sg  jwsSigner
	o   WebhookOptions
	hc  *http.Client
	sem chan struct{}
}

// run claims due deliveries every Poll until the server closes, and sends
// each in its own goroutine (at most Concurrency at once).
func (d *dispatcher) run() {
	defer d.s.wg.Done()
	defer d.hc.CloseIdleConnections()
	t := time.NewTicker(d.o.Poll)
	defer t.Stop()
	for {
		for d.claimOne() {
		}
		select {
		case <-d.s.claimCtx.Done():
			// Wait for the deliveries in flight (they end with workCtx).
			for range cap(d.sem) {
				d.sem <- struct{}{}
			}
			return
		case <-t.C:
		}
	}
}

// claimOne claims and starts one due delivery; false when none is due
// (or the store failed, or the server is closing).
func (d *dispatcher) claimOne() bool {
	select {
	case d.sem <- struct{}{}:
	case <-d.s.claimCtx.Done():
		return false
	}
	now := d.s.cfg.Now()
	// The lease outlasts an attempt, so no other replica sends it meanwhile.
	del, err := d.ws.ClaimDelivery(d.s.claimCtx, now, now.Add(2*d.o.Timeout+time.Minute))
	if err != nil || del == nil {
		<-d.sem
		if err != nil && d.s.claimCtx.Err() == nil {
			d.s.log.Warn("webhook: claiming a delivery failed", "err", err)
		}
		return false
	}
	go func() {
		defer func() { <-d.sem }()
		d.deliver(del)
	}()
	return true
}

// deliver makes one attempt of del and records its outcome.
func (d *dispatcher) deliver(del *store.Delivery) {
	ctx := d.s.workCtx
	log := d.s.log.With("request_id", del.RequestID, "attempt", del.Attempts, "callback_host", hostOf(del.URL))
	req, err := d.s.cfg.Store.GetRequest(ctx, del.Owner, del.RequestID)
	if errors.Is(err, store.ErrNotFound) {
		_ = d.ws.EndDelivery(ctx, del.RequestID) // the request was deleted
		return
	}
	if err != nil {
		d.retry(ctx, del, time.Time{}, "reading the request: "+err.Error(), log)
		return
	}
	ended := req.CompletedAt
	if ended.IsZero() {
		ended = req.UpdatedAt
	}
	body, err := payloadOf(req)
	if err != nil {
		log.Error("webhook: the stored outcome is unreadable; giving up", "err", err)
		_ = d.ws.EndDelivery(ctx, del.RequestID)
		return
	}
	start := time.Now()
	err = d.post(ctx, del, body)
	if err == nil {
		if err := d.ws.EndDelivery(ctx, del.RequestID); err != nil && !errors.Is(err, store.ErrNotFound) {
			log.Warn("webhook: delivered, but ending the delivery failed (it may be sent again)", "err", err)
		}
		log.Info("webhook delivered", "took", time.Since(start).Round(time.Millisecond))
		return
	}
	d.retry(ctx, del, ended, err.Error(), log)
}

// retry schedules the next attempt of del, or gives up once RetryFor has
// passed since the request ended.
func (d *dispatcher) retry(ctx context.Context, del *store.Delivery, ended time.Time, why string, log interface {
	Warn(string, ...any)
}) {
	now := d.s.cfg.Now()
	if !ended.IsZero() && now.Sub(ended) >= d.o.RetryFor {
		log.Warn("webhook: giving up", "last_error", why, "ended", ended)
		_ = d.ws.EndDelivery(ctx, del.RequestID)
		return
	}
	next := now.Add(d.backoff(del.Attempts))
	log.Warn("webhook: attempt failed; retrying", "last_error", why, "next", next)
	if err := d.ws.RetryDelivery(ctx, del.RequestID, next, why); err != nil && !errors.Is(err, store.ErrNotFound) {
		log.Warn("webhook: recording the retry failed (the lease will expire)", "err", err)
	}
}

// backoff is full-jitter exponential backoff after attempt n (from 1):
// a random duration in [MinBackoff, min(MaxBackoff, MinBackoff·2^(n-1))].
func (d *dispatcher) backoff(n int) time.Duration {
	ceil := d.o.MinBackoff << min(max(n-1, 0), 30)
	if ceil > d.o.MaxBackoff || ceil <= 0 {
		ceil = d.o.MaxBackoff
	}
	span := int64(ceil - d.o.MinBackoff)
	if span <= 0 {
		return d.o.MinBackoff
	}
	return d.o.MinBackoff + time.Duration(rand.Int64N(span+1))
}

// IdempotencyKey is the Idempotency-Key of the deliveries of request id:
// the same on every attempt.
func IdempotencyKey(requestID string) string { return "acds-webhook-" + requestID }

// post sends body, signed, to del.URL: nil on a 2xx answer.
func (d *dispatcher) post(ctx context.Context, del *store.Delivery, body []byte) error {
	// The URL was checked at acceptance; the guard checks it again (and
	// the dialer every address) in case the operator's rules changed.
	if _, err := d.o.Guard.CheckURL(del.URL); err != nil {
		return err
	}
	sig, err := webhook.Sign(d.sg.SignJWS, d.sg.SigningKey(), body)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, d.o.Timeout)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, del.URL, strings.NewReader(string(body)))
	if err != nil {
		return fmt.Errorf("building the request: %w", err)
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(webhook.SignatureHeader, sig)
	r.Header.Set(webhook.IdempotencyHeader, IdempotencyKey(del.RequestID))
	r.Header.Set("User-Agent", "acds-webhook/"+acds.Version)
	resp, err := d.hc.Do(r)
	if err != nil {
		// The URL may carry a secret in its query: never quote it.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("POST to %s: %w", hostOf(del.URL), err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("POST to %s: answered %d", hostOf(del.URL), resp.StatusCode)
	}
	return nil
}

// payloadOf is the delivery body of an ended request.
func payloadOf(req store.Request) ([]byte, error) {
	p := webhook.Payload{RequestID: req.ID, Status: req.Status}
	switch req.Status {
	case acds.StatusCompleted:
		var res struct {
			OutputDigest string `json:"outputDigest"`
		}
		if err := json.Unmarshal(req.Result, &res); err != nil {
			return nil, err
		}
		p.OutputDigest = res.OutputDigest
	case acds.StatusFailed:
		var prob acds.Problem
		if len(req.Error) > 0 {
			if err := json.Unmarshal(req.Error, &prob); err != nil {
				return nil, err
			}
		} else {
			prob = *acds.NewProblem(acds.ProblemInternal, "the request failed")
		}
		prob.OperationOutcome = nil // the receiver asks GET /v1/requests/{id} for details
		p.Error = &prob
	default:
		return nil, fmt.Errorf("request %s has not ended (%s)", req.ID, req.Status)
	}
	return json.Marshal(p)
}

// hostOf is the host of a callback URL, for logs and errors (never the
// path or query, which may carry a receiver's secret).
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Host
}
