package server

import (
	"errors"
	"io"
	"log"
	"net/http"
	"time"

	"github.com/acds-project/acds"
)

// Request bodies are the one thing a client can make the server hold in
// memory before any check of who it is or what it sends. Three rules bound
// them:
//
//   - readLimited reads in chunks as bytes arrive and never allocates from
//     the declared Content-Length, so a connection that declares 32 MiB
//     and sends nothing costs at most 64 KiB (firstChunk; a body that
//     declares less gets a buffer of its declared size);
//   - at most Config.MaxBodies bodies are read or held at once; a request
//     past that answers 503 unavailable with Retry-After before its body
//     is read;
//   - every body read has a deadline (Config.BodyIdleTimeout between two
//     chunks, Config.BodyTimeout in all), set on the connection through
//     http.ResponseController, so a stalled or trickling upload is closed.

// errBodyTimeout is the read error of a body whose deadline passed.
var errBodyTimeout = errors.New("request body read deadline exceeded")

// bodyGate admits a request that carries a body. It holds one of
// Config.MaxBodies slots until the handler returns, and sets the read
// deadlines of the body. A request without a body passes untouched.
func (s *Server) bodyGate(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
			h(w, r)
			return
		}
		select {
		case s.bodies <- struct{}{}:
		default:
			p := acds.NewProblem(acds.ProblemUnavailable, "too many request bodies are being received; retry later")
			p.RetryAfter = 1
			w.Header().Set("Connection", "close")
			writeProblem(w, p)
			return
		}
		defer func() { <-s.bodies }()
		dr := &deadlineBody{
			rc:    http.NewResponseController(w),
			body:  r.Body,
			idle:  s.cfg.BodyIdleTimeout,
			until: time.Now().Add(s.cfg.BodyTimeout),
		}
		// Armed now, the deadline also bounds a body the handler never
		// reads (a request refused first): net/http discards its rest
		// after the handler, and a client that never sends it would
		// otherwise hold the connection. It is lifted once the body has
		// been read to its end.
		dr.arm()
		r.Body = dr
		h(w, r)
		if dr.timedOut {
			// The client stalled: nothing it would read is owed, and the
			// connection cannot be read any further. Close it.
			panic(http.ErrAbortHandler)
		}
	}
}

// deadlineBody sets a read deadline on the connection before each read of
// the body: the sooner of now+idle and until. It clears the deadline at
// the end of the body (not when the handler returns without reading it
// all: the deadline then bounds what net/http discards), so that the server's background read (which
// notices a client that goes away during a long poll or a long
// verification) is not cut short.
type deadlineBody struct {
	rc       *http.ResponseController
	body     io.ReadCloser
	idle     time.Duration
	until    time.Time
	set      bool
	done     bool
	timedOut bool
}

// arm sets the read deadline for the next chunk: the sooner of now+idle
// and until.
func (d *deadlineBody) arm() {
	dl := time.Now().Add(d.idle)
	if d.until.Before(dl) {
		dl = d.until
	}
	if err := d.rc.SetReadDeadline(dl); err == nil {
		d.set = true
	}
}

func (d *deadlineBody) Read(p []byte) (int, error) {
	if d.done {
		return d.body.Read(p)
	}
	d.arm()
	n, err := d.body.Read(p)
	if err != nil {
		var ne interface{ Timeout() bool }
		if errors.As(err, &ne) && ne.Timeout() {
			d.timedOut = true
			return n, errBodyTimeout
		}
		d.clear()
	}
	return n, err
}

// clear removes the read deadline once the body has been read to its end
// (or failed otherwise than by the deadline).
func (d *deadlineBody) clear() {
	d.done = true
	if d.set && !d.timedOut {
		_ = d.rc.SetReadDeadline(time.Time{})
		d.set = false
	}
}

func (d *deadlineBody) Close() error { return d.body.Close() }

// HTTPOptions are the connection limits of the *http.Server NewHTTPServer
// builds. Every zero value means the default named on the field.
type HTTPOptions struct {
	// ReadHeaderTimeout bounds reading a request's headers. Zero means
	// DefaultReadHeaderTimeout.
	ReadHeaderTimeout time.Duration
	// IdleTimeout bounds how long a kept-alive connection waits for its
	// next request. Zero means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers. Zero means
	// DefaultMaxHeaderBytes.
	MaxHeaderBytes int
	// ErrorLog receives the http.Server's own errors. Nil means the
	// standard logger, as http.Server does.
	ErrorLog *log.Logger
}

// Defaults of HTTPOptions and of the body deadlines in Config.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultBodyIdleTimeout   = 15 * time.Second
	DefaultBodyTimeout       = 2 * time.Minute
	DefaultMaxBodies         = 64
)

// NewHTTPServer returns an *http.Server that serves h with the connection
// limits ACDS relies on: a header read timeout, an idle timeout and a
// header size limit. It sets no ReadTimeout or WriteTimeout on purpose: the
// Handler sets its own deadline on every body it reads (Config.BodyTimeout
// and Config.BodyIdleTimeout), and a connection-wide ReadTimeout would
// cancel long polls (GET /v1/requests/{id}?wait=N) and long verifications
// whose body was read quickly. Set TLSConfig, BaseContext and the like on
// the result as needed.
func NewHTTPServer(h http.Handler, o HTTPOptions) *http.Server {
	if o.ReadHeaderTimeout <= 0 {
		o.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: o.ReadHeaderTimeout,
		IdleTimeout:       o.IdleTimeout,
		MaxHeaderBytes:    o.MaxHeaderBytes,
		ErrorLog:          o.ErrorLog,
	}
}
