package portal

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/acds-project/acds/mpctls/notary"
	"github.com/acds-project/acds/mpctls/prover"
)

func (s *session) checkRedirect(req *http.Request, via []*http.Request) error {
	if s.redirectURI != "" && strings.HasPrefix(req.URL.String(), s.redirectURI) {
		return http.ErrUseLastResponse
	}
	return s.c.Guard.CheckRedirect(req, via)
}

// exchange is one HTTP exchange with its body read.
type exchange struct {
	status int
	header http.Header
	body   []byte
	url    *url.URL // the final URL, after redirects
	line   string   // the request line sent (its last attempt's), for FHIR API exchanges
}

// retryable classes of failure.
func retryStatus(code int) bool {
	return code == http.StatusTooManyRequests || code == http.StatusInternalServerError ||
		code == http.StatusBadGateway || code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout
}

// retryAfter parses a Retry-After header (seconds or an HTTP date).
func retryAfter(h string, now time.Time) (time.Duration, bool) {
	if h == "" {
		return 0, false
	}
	if n, err := strconv.ParseUint(strings.TrimSpace(h), 10, 63); err == nil {
		return time.Duration(min(n, 1<<32)) * time.Second, true // capped: no overflow
	} else if errors.Is(err, strconv.ErrRange) {
		return time.Duration(1<<32) * time.Second, true
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(0, t.Sub(now)), true
	}
	return 0, false
}

func (s *session) backoff(attempt int) time.Duration {
	d := orDuration(s.c.Backoff, 200*time.Millisecond) << attempt
	if j, err := rand.Int(s.c.rand(), big.NewInt(int64(d/2)+1)); err == nil {
		d += time.Duration(j.Int64())
	}
	return d
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// classifyTransport turns a failed round trip into an error, and says
// whether a retry may help. The error names the portal's host and what
// went wrong, never an address it resolved to, the notary's address or
// the resolver's (see netError).
func (s *session) classifyTransport(op string, err error) (error, bool) {
	host := s.base.Hostname()
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil && u.Hostname() != "" {
			host = u.Hostname() // a redirect may have led elsewhere
		}
	}
	var (
		fe *ForbiddenError
		pe *Error
		ne *prover.NotaryError
	)
	switch {
	case errors.As(err, &fe):
		if fe.dialled {
			// The guard refused the address the name resolved to at
			// connect time: say so without the address.
			return &ForbiddenError{Target: host, Reason: "it resolves to a refused address (" + fe.Reason + ")"}, false
		}
		return fe, false
	case errors.Is(err, ErrForbidden):
		return &Error{Kind: ErrForbidden, Op: op}, false
	case errors.As(err, &pe):
		// Already classified by this package: GuardedDialer (whose text
		// is safe), CheckRedirect.
		if errors.Is(pe.Kind, ErrUnavailable) {
			return &Error{Kind: ErrUnavailable, Op: op, Err: pe.Err}, true
		}
		return pe, false
	case errors.As(err, &ne):
		switch {
		case ne.Type == notary.ProblemTargetUnresolved,
			// Notaries older than ProblemTargetUnresolved answered 403.
			ne.Status == http.StatusForbidden && strings.Contains(ne.Detail, "cannot resolve"):
			return &Error{Kind: ErrUnavailable, Op: op, Err: &netError{msg: host + ": the name could not be resolved", cause: err}}, true
		case ne.Status == http.StatusForbidden:
			return &ForbiddenError{Target: host, Reason: "the notary refused its address (not a public address)"}, false
		case ne.Status == http.StatusBadGateway:
			return &Error{Kind: ErrUnavailable, Op: op, Err: &netError{msg: host + ": no address of the portal answered", cause: err}}, true
		}
		// Full (503) or failing: the service's side, not the portal's.
		return &Error{Kind: ErrNotarization, Op: op, Err: &netError{msg: fmt.Sprintf("the notary answered HTTP %d", ne.Status), cause: err}}, true
	case errors.Is(err, prover.ErrNotary):
		return &Error{Kind: ErrNotarization, Op: op, Err: &netError{msg: "the notary could not be reached", cause: err}}, true
	case errors.Is(err, ErrResponseInvalid):
		return err, false
	}
	return unreachable(op, host, err), true
}

// do runs one exchange with bounded retries. build makes a fresh request
// for each attempt. limit caps the body; data exchanges also count toward
// the record's byte and page limits.
func (s *session) do(ctx context.Context, op string, data bool, build func(ctx context.Context) (*http.Request, error)) (*exchange, error) {
	retries := s.c.maxRetries()
	for attempt := 0; ; attempt++ {
		if data && s.pages >= s.c.maxPages() {
			return nil, &Error{Kind: ErrResponseInvalid, Op: op, Err: ErrLimit, Detail: fmt.Sprintf("more than %d FHIR responses", s.c.maxPages())}
		}
		ex, err, wait := s.once(ctx, op, data, build)
		if err == nil {
			return ex, nil
		}
		if wait < 0 || attempt >= retries || ctx.Err() != nil {
			if ctx.Err() != nil && !errors.Is(err, ErrForbidden) {
				return nil, &Error{Kind: ErrUnavailable, Op: op, Err: ctx.Err()}
			}
			return nil, err
		}
		if b := s.backoff(attempt); b > wait {
			wait = b
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, &Error{Kind: ErrUnavailable, Op: op, Err: err}
		}
	}
}

// once runs one attempt. wait < 0 means the error is final; otherwise it
// is the least time to wait before retrying.
func (s *session) once(ctx context.Context, op string, data bool, build func(ctx context.Context) (*http.Request, error)) (*exchange, error, time.Duration) {
	actx, cancel := context.WithTimeout(ctx, orDuration(s.c.RequestTimeout, time.Minute))
	defer cancel()
	req, err := build(actx)
	if err != nil {
		return nil, &Error{Kind: ErrInvalidRequest, Op: op, Err: err}, -1
	}
	req.Header.Set("Accept-Encoding", "identity")
	line := ""
	if data {
		line = requestLine(req)
		s.pages++
		s.lines = append(s.lines, line)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		e, retry := s.classifyTransport(op, err)
		if !retry {
			return nil, e, -1
		}
		return nil, e, 0
	}
	defer resp.Body.Close()
	limit := s.c.maxBytes() - s.bytes
	if !data {
		limit = min(limit, maxAuthPage)
	}
	body, err := readBody(resp, limit+1)
	s.bytes += int64(len(body))
	if err != nil {
		return nil, &Error{Kind: ErrUnavailable, Op: op, Status: resp.StatusCode, Err: safeCause(err)}, 0
	}
	if int64(len(body)) > limit {
		return nil, &Error{Kind: ErrResponseInvalid, Op: op, Err: ErrLimit, Detail: fmt.Sprintf("more than %d bytes", s.c.maxBytes())}, -1
	}
	if retryStatus(resp.StatusCode) {
		e := &Error{Kind: ErrUnavailable, Op: op, Status: resp.StatusCode, Detail: s.outcomeText(body)}
		wait, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now())
		if ok && wait > orDuration(s.c.MaxRetryAfter, 30*time.Second) {
			e.Detail = fmt.Sprintf("Retry-After %s is beyond the %s the service waits", wait, orDuration(s.c.MaxRetryAfter, 30*time.Second))
			return nil, e, -1
		}
		return nil, e, wait
	}
	return &exchange{status: resp.StatusCode, header: resp.Header, body: body, url: resp.Request.URL, line: line}, nil, 0
}

// readBody reads at most max bytes of resp's body. When the portal
// announced the length (within max), the buffer is allocated once at that
// size instead of growing (and being copied) as io.ReadAll's does, which
// for a megabyte page cost several copies.
func readBody(resp *http.Response, max int64) ([]byte, error) {
	n := resp.ContentLength
	if n < 0 || n >= max {
		return io.ReadAll(io.LimitReader(resp.Body, max))
	}
	buf := bytes.NewBuffer(make([]byte, 0, n+bytes.MinRead))
	_, err := buf.ReadFrom(io.LimitReader(resp.Body, max))
	return buf.Bytes(), err
}

// requestLine renders req as an HTTP/1.1 request line.
func requestLine(req *http.Request) string {
	return req.Method + " " + req.URL.RequestURI() + " HTTP/1.1"
}

// outcomeText extracts the diagnostics of an OperationOutcome body, or a
// capped excerpt of any other body, redacted.
func (s *session) outcomeText(body []byte) string {
	var oo struct {
		ResourceType string `json:"resourceType"`
		Issue        []struct {
			Code        string `json:"code"`
			Diagnostics string `json:"diagnostics"`
		} `json:"issue"`
	}
	if json.Unmarshal(body, &oo) == nil && oo.ResourceType == "OperationOutcome" {
		var parts []string
		for _, is := range oo.Issue {
			parts = append(parts, strings.TrimSpace(is.Code+" "+is.Diagnostics))
		}
		return s.red.detail(strings.Join(parts, "; "))
	}
	return ""
}

// authError classifies a 401 or 403 answer of the FHIR API.
func (s *session) authError(op string, ex *exchange) error {
	var oo struct {
		Issue []struct {
			Code    string `json:"code"`
			Details struct {
				Coding []struct {
					Code string `json:"code"`
				} `json:"coding"`
			} `json:"details"`
		} `json:"issue"`
	}
	json.Unmarshal(ex.body, &oo)
	mfa, locked := strings.Contains(strings.ToLower(ex.header.Get("WWW-Authenticate")), "mfa"), false
	for _, is := range oo.Issue {
		locked = locked || is.Code == "lock-error"
		for _, c := range is.Details.Coding {
			mfa = mfa || strings.Contains(c.Code, "mfa")
			locked = locked || strings.Contains(c.Code, "locked")
		}
	}
	e := &Error{Op: op, Status: ex.status, Detail: s.outcomeText(ex.body)}
	switch {
	case mfa:
		e.Kind = ErrMFARequired
	case locked:
		e.Kind, e.Err = ErrAuthFailed, ErrAccountLocked
	case ex.status == http.StatusForbidden:
		e.Kind = ErrRecordNotFound
	default:
		e.Kind = ErrAuthFailed
	}
	return e
}
