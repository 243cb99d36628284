package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/acds-project/acds"
)

// maxEventSize bounds one server-sent event (a record without its output:
// a few KiB with the attestation bundle).
const maxEventSize = 1 << 20

// ErrEventStream is wrapped by the errors of a stream that is not one:
// a response that is not text/event-stream, an event too large or not
// JSON, or a stream silent for longer than Options.EventIdleTimeout.
var ErrEventStream = errors.New("client: bad event stream")

// Events follows request id through GET /v1/requests/{id}/events
// (server-sent events): it yields the request record (without its output;
// Request or Wait fetch it) as it is when the stream opens and again on
// every change, and stops after the record of a completed or failed
// request. A failed record is yielded with a nil error: rec.Err() is its
// problem.
//
// An error ends the sequence: an *acds.Problem when the server refuses
// the stream (404 for a request that is not the caller's) or the request
// is deleted meanwhile, an error wrapping ErrEventStream, or ctx's error.
// A connection that drops before the end is reopened (at most
// Options.MaxRetries times in a row, with the client's backoff; 429 and
// 503 honour Retry-After), and a record already yielded is not yielded
// again. A stream that sends nothing, not even a keep-alive comment, for
// Options.EventIdleTimeout is dropped and reopened the same way. Breaking
// out of the loop closes the stream.
//
//	for rec, err := range c.Events(ctx, id) {
//		if err != nil { return err }
//		fmt.Println(rec.Status)
//	}
func (c *Client) Events(ctx context.Context, id string) iter.Seq2[*acds.Request, error] {
	return func(yield func(*acds.Request, error) bool) {
		var last *acds.Request
		failures := 0
		for {
			done, progressed, err := c.eventStream(ctx, id, &last, yield)
			if done {
				return
			}
			if ctx.Err() != nil {
				yield(nil, ctx.Err())
				return
			}
			var p *acds.Problem
			if errors.As(err, &p) && p.Status != http.StatusTooManyRequests && p.Status != http.StatusServiceUnavailable {
				yield(nil, err)
				return
			}
			if progressed {
				failures = 0
			}
			if c.opt.MaxRetries < 0 || failures >= c.opt.MaxRetries {
				yield(nil, err)
				return
			}
			wait := c.backoff(failures)
			if p != nil && p.RetryAfter > 0 {
				if ra := time.Duration(p.RetryAfter) * time.Second; ra <= c.opt.MaxRetryAfter {
					wait = ra
				}
			}
			failures++
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				yield(nil, ctx.Err())
				return
			case <-t.C:
			}
		}
	}
}

// errEventFormat marks stream errors that reopening cannot fix.
var errEventFormat = fmt.Errorf("%w", ErrEventStream)

// eventStream opens one stream and yields its new records. done is true
// when the sequence is over (the terminal record was yielded, a problem
// event or a malformed event was yielded, or yield asked to stop);
// otherwise err says why the stream ended and progressed whether it
// yielded anything.
func (c *Client) eventStream(ctx context.Context, id string, last **acds.Request, yield func(*acds.Request, error) bool) (done, progressed bool, err error) {
	idle := c.opt.EventIdleTimeout
	if idle <= 0 {
		idle = 45 * time.Second
	}
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	errIdle := fmt.Errorf("%w: nothing received for %s", ErrEventStream, idle)
	timer := time.AfterFunc(idle, func() { cancel(errIdle) })
	defer timer.Stop()

	u := *c.base
	path := "/v1/requests/" + url.PathEscape(id) + "/events"
	u.Path = c.base.Path + path
	u.RawPath = ""
	if c.base.RawPath != "" || strings.Contains(path, "%") {
		u.RawPath = c.base.EscapedPath() + path
	}
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return false, false, fmt.Errorf("client: %w", err)
	}
	req.Header.Set("Accept", "text/event-stream, application/problem+json")
	req.Header.Set("User-Agent", c.opt.UserAgent)
	if c.opt.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.opt.Token)
	}
	hc := *c.hc
	hc.Timeout = 0 // a stream lasts as long as the request; the idle timer bounds silence
	resp, err := hc.Do(req)
	if err != nil {
		if cause := context.Cause(sctx); errors.Is(cause, ErrEventStream) {
			return false, false, cause
		}
		return false, false, fmt.Errorf("client: GET %s: %w", req.URL.Path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, false, problemFrom(resp)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return true, false, yieldErr(yield, fmt.Errorf("%w: Content-Type %q", errEventFormat, resp.Header.Get("Content-Type")))
	}

	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 4096), maxEventSize)
	var event string
	var data strings.Builder
	for sc.Scan() {
		timer.Reset(idle)
		line := strings.TrimSuffix(sc.Text(), "\r")
		switch {
		case line == "":
			if data.Len() == 0 {
				event = ""
				continue
			}
			d := data.String()
			data.Reset()
			name := event
			event = ""
			switch name {
			case "status":
				var rec acds.Request
				if err := json.Unmarshal([]byte(d), &rec); err != nil || rec.RequestID == "" {
					return true, progressed, yieldErr(yield, fmt.Errorf("%w: a status event that is not a request record", errEventFormat))
				}
				if l := *last; l != nil && l.Status == rec.Status && l.UpdatedAt.Equal(rec.UpdatedAt) {
					continue // seen before the stream was reopened
				}
				*last, progressed = &rec, true
				if !yield(&rec, nil) || rec.Done() {
					return true, true, nil
				}
			case "problem":
				var p acds.Problem
				if err := json.Unmarshal([]byte(d), &p); err != nil || p.Type == "" {
					p = *acds.NewProblem(acds.ProblemInternal, excerpt([]byte(d)))
				}
				if p.Status == 0 {
					p.Status = acds.ProblemStatus(p.Code())
				}
				return true, progressed, yieldErr(yield, &p)
			}
		case strings.HasPrefix(line, ":"):
			// a comment: the keep-alive
		default:
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "event":
				event = value
			case "data":
				if data.Len() > 0 {
					data.WriteByte('\n')
				}
				data.WriteString(value)
			}
		}
	}
	err = sc.Err()
	if cause := context.Cause(sctx); errors.Is(cause, ErrEventStream) {
		return false, progressed, cause
	}
	if errors.Is(err, bufio.ErrTooLong) {
		return true, progressed, yieldErr(yield, fmt.Errorf("%w: an event larger than %d bytes", errEventFormat, maxEventSize))
	}
	if err == nil {
		err = fmt.Errorf("%w: the stream ended before the request did", ErrEventStream)
	}
	return false, progressed, err
}

func yieldErr(yield func(*acds.Request, error) bool, err error) error {
	yield(nil, err)
	return err
}
