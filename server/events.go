package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/store"
	"github.com/google/uuid"
)

// Server-sent events (DESIGN §10): GET /v1/requests/{id}/events streams
// the owner's request as "event: status" messages whose data is the
// request record without the output (result keeps outputFormat,
// outputDigest and attestationBundle: GET /v1/requests/{id} has the
// output). The first message is the record as it is when the stream
// opens; another follows on every change of status or updatedAt; the
// stream ends after the message of a completed or failed record. While
// nothing changes a comment (": keep-alive") is sent every
// Config.EventKeepAlive, so proxies and clients see a live connection.
// A request deleted while streamed ends the stream with an "event:
// problem" carrying the not-found problem; a server that is closing ends
// its streams without one (the client reconnects, possibly to another
// replica, and gets the current record first).
//
// Changes are seen the way long-polling sees them (longpoll.go): this
// server's workers wake the streams of a request when they stop working
// on it, and a request no local worker runs (another replica's, on a
// shared PostgreSQL) is re-read from the store every recheck interval
// (200 ms). That works on every Store, costs one indexed read per stream
// and interval only while another replica holds the request, and bounds
// the cross-replica delay by the interval; LISTEN/NOTIFY would deliver
// sooner but needs a dedicated connection per replica and a trigger or
// notify in every store write path of package sqlstore, for an
// improvement of at most 200 ms on requests that take seconds.

const (
	defaultEventKeepAlive        = 15 * time.Second
	defaultMaxEventStreams       = 1000
	defaultMaxEventStreamsPerOwn = 8
	// eventWriteTimeout bounds each write of a stream to a slow client.
	eventWriteTimeout = 30 * time.Second
	// eventRetryAfter is the Retry-After of a refused stream, in seconds.
	eventRetryAfter = 5
)

// eventStreams counts the open streams of a Server, in total and per
// owner. Its zero value is ready to use.
type eventStreams struct {
	mu       sync.Mutex
	total    int
	perOwner map[string]int
}

// acquire registers a stream of owner, or reports false when a bound is
// reached. release must be called exactly once after a true.
func (e *eventStreams) acquire(owner string, maxTotal, maxOwner int) (release func(), ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.total >= maxTotal || e.perOwner[owner] >= maxOwner {
		return nil, false
	}
	if e.perOwner == nil {
		e.perOwner = map[string]int{}
	}
	e.total++
	e.perOwner[owner]++
	return func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.total--
		if e.perOwner[owner]--; e.perOwner[owner] <= 0 {
			delete(e.perOwner, owner)
		}
	}, true
}

// eventResult is acds.Result without the output.
type eventResult struct {
	OutputFormat      string `json:"outputFormat"`
	OutputDigest      string `json:"outputDigest"`
	AttestationBundle string `json:"attestationBundle"`
}

// eventData is the data of an "event: status" message for req.
func eventData(req store.Request) ([]byte, error) {
	out, err := wireRequest(req)
	if err != nil {
		return nil, err
	}
	rec := struct {
		acds.Request
		Result *eventResult `json:"result,omitempty"` // shadows the embedded Result
	}{Request: out}
	if r := out.Result; r != nil {
		rec.Result = &eventResult{OutputFormat: r.OutputFormat, OutputDigest: r.OutputDigest, AttestationBundle: r.AttestationBundle}
	}
	return json.Marshal(rec)
}

// handleEvents serves GET /v1/requests/{id}/events.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	for k := range r.URL.Query() {
		writeProblem(w, fieldProblem(k, "unknown query parameter; this path takes none"))
		return
	}
	id := r.PathValue("id")
	if uuid.Validate(id) != nil {
		writeProblem(w, acds.NewProblem(acds.ProblemNotFound, "no such request"))
		return
	}
	owner, ctx := ownerFrom(r), r.Context()
	req, err := s.cfg.Store.GetRequest(ctx, owner, id)
	if isNotFound(err) {
		writeProblem(w, acds.NewProblem(acds.ProblemNotFound, "no such request"))
		return
	}
	if err != nil {
		s.storeFailed(w, "get request", err)
		return
	}
	maxTotal, maxOwner := s.cfg.MaxEventStreams, s.cfg.MaxEventStreamsPerOwner
	if maxTotal <= 0 {
		maxTotal = defaultMaxEventStreams
	}
	if maxOwner <= 0 {
		maxOwner = defaultMaxEventStreamsPerOwn
	}
	release, ok := s.streams.acquire(owner, maxTotal, maxOwner)
	if !ok {
		p := acds.NewProblem(acds.ProblemRateLimited, "too many open event streams; close one, or poll GET /v1/requests/{id}?wait=N")
		p.RetryAfter = eventRetryAfter
		writeProblem(w, p)
		return
	}
	defer release()
	keepAlive := s.cfg.EventKeepAlive
	if keepAlive <= 0 {
		keepAlive = defaultEventKeepAlive
	}

	rc := http.NewResponseController(w)
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	write := func(b []byte) error {
		if err := rc.SetWriteDeadline(time.Now().Add(eventWriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
		return rc.Flush()
	}
	send := func(req store.Request) error {
		data, err := eventData(req)
		if err != nil {
			s.log.Error("stored request unreadable", "request_id", id, "err", err)
			p, _ := json.Marshal(acds.NewProblem(acds.ProblemInternal, "the stored request is unreadable"))
			_ = write(fmt.Appendf(nil, "event: problem\ndata: %s\n\n", p))
			return err
		}
		return write(fmt.Appendf(nil, "event: status\ndata: %s\n\n", data))
	}

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	if send(req) != nil || req.Status != acds.StatusProcessing {
		return
	}
	last := req

	keep := time.NewTicker(keepAlive)
	defer keep.Stop()
	recheck := time.NewTicker(time.Duration(s.waiters.recheck.Load()))
	defer recheck.Stop()
	for {
		if !s.nextEvent(ctx, owner, id, &last, recheck.C, keep.C, write, send) {
			return
		}
	}
}

// nextEvent reads the request once (subscribed to its wake-up first, so
// that an end between the read and the sleep still wakes the stream),
// sends it when it changed, and sleeps until a wake-up, a recheck or the
// end of the stream, sending keep-alive comments meanwhile. It reports
// whether the stream goes on.
func (s *Server) nextEvent(ctx context.Context, owner, id string, last *store.Request, recheck, keep <-chan time.Time,
	write func([]byte) error, send func(store.Request) error) bool {
	// Past the waiter bounds ch is nil (never ready) and the stream
	// re-reads at every recheck instead.
	ch, unsubscribe, subscribed := s.waiters.subscribe(id, owner)
	if subscribed {
		defer unsubscribe()
	}
	cur, err := s.cfg.Store.GetRequest(ctx, owner, id)
	switch {
	case ctx.Err() != nil:
		return false
	case isNotFound(err):
		p, _ := json.Marshal(acds.NewProblem(acds.ProblemNotFound, "the request was deleted"))
		_ = write(fmt.Appendf(nil, "event: problem\ndata: %s\n\n", p))
		return false
	case err != nil:
		// The store is unavailable: keep the stream and read again at
		// the next recheck (the service recovers when the store does).
		s.log.Warn("event stream: store read failed", "request_id", id, "err", err)
	case cur.Status != last.Status || !cur.UpdatedAt.Equal(last.UpdatedAt):
		cur.Input, cur.Sealed = nil, nil
		if send(cur) != nil || cur.Status != acds.StatusProcessing {
			return false
		}
		*last = cur
	}
	for {
		select {
		case <-ch:
			return true
		case <-recheck:
			if !subscribed || err != nil || !s.waiters.runningHere(id) {
				return true
			}
		case <-keep:
			if write([]byte(": keep-alive\n\n")) != nil {
				return false
			}
		case <-s.claimCtx.Done():
			return false
		case <-ctx.Done():
			return false
		}
	}
}
