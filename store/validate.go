package store

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/acds-project/acds"
)

// Time precision: both backends keep timestamps in microseconds (the
// resolution of PostgreSQL's timestamptz) and return them in UTC, so a value
// read back equals the value written truncated to the microsecond.
func dbTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// MaxIDLen bounds ids, owners and worker names: they are UUIDs and
// pseudonyms in practice, and a bound keeps indexes and cursors small.
const MaxIDLen = 200

func checkName(what, v string) error {
	if v == "" {
		return fmt.Errorf("%w: empty %s", ErrInvalid, what)
	}
	if len(v) > MaxIDLen {
		return fmt.Errorf("%w: %s longer than %d bytes", ErrInvalid, what, MaxIDLen)
	}
	return nil
}

func checkSession(s Session) error {
	if err := checkName("pseudonym", s.Pseudonym); err != nil {
		return err
	}
	if err := checkTokenHash(s.TokenHash); err != nil {
		return err
	}
	if s.CreatedAt.IsZero() || s.ExpiresAt.IsZero() {
		return fmt.Errorf("%w: session times must be set", ErrInvalid)
	}
	return nil
}

func checkTokenHash(h []byte) error {
	if len(h) != 32 {
		return fmt.Errorf("%w: token hash is %d bytes, want 32", ErrInvalid, len(h))
	}
	return nil
}

func checkNewRequest(r Request) error {
	if err := checkName("request id", r.ID); err != nil {
		return err
	}
	if err := checkName("owner", r.Owner); err != nil {
		return err
	}
	if r.Kind != acds.KindProcess && r.Kind != acds.KindFetchAndAttest {
		return fmt.Errorf("%w: unknown request kind %q", ErrInvalid, r.Kind)
	}
	if r.Status != "" && r.Status != acds.StatusProcessing {
		return fmt.Errorf("%w: a new request must be %s, not %q", ErrInvalid, acds.StatusProcessing, r.Status)
	}
	if r.CreatedAt.IsZero() {
		return fmt.Errorf("%w: request created_at must be set", ErrInvalid)
	}
	if len(r.Affinity) > MaxIDLen {
		return fmt.Errorf("%w: request affinity is longer than %d bytes", ErrInvalid, MaxIDLen)
	}
	if len(r.Callback) > MaxCallbackLen {
		return fmt.Errorf("%w: callback URL longer than %d bytes", ErrInvalid, MaxCallbackLen)
	}
	return nil
}

// MaxCallbackLen bounds Request.Callback.
const MaxCallbackLen = 2048

// claimSettings validates o and fills in its documented defaults.
func claimSettings(o ClaimOptions) (ClaimOptions, error) {
	if err := checkName("worker", o.Worker); err != nil {
		return o, err
	}
	if o.Lease <= 0 {
		return o, fmt.Errorf("%w: lease must be positive", ErrInvalid)
	}
	if o.MaxAttempts < 0 {
		return o, fmt.Errorf("%w: negative max attempts", ErrInvalid)
	}
	if o.Solo && !o.Isolate {
		return o, fmt.Errorf("%w: a solo claim needs crash isolation", ErrInvalid)
	}
	if len(o.Affinity) > MaxIDLen {
		return o, fmt.Errorf("%w: affinity is longer than %d bytes", ErrInvalid, MaxIDLen)
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	o.Now = dbTime(o.Now)
	return o, nil
}

// Page limits.
const (
	minPageLimit = 1
	maxPageLimit = 100
)

func clampLimit(n int) int {
	return min(max(n, minPageLimit), maxPageLimit)
}

// A cursor names the last request of a page by (created_at, id): the next
// page starts strictly after it in (created_at DESC, id DESC) order, so
// pages are stable across requests created in the same microsecond and
// across inserts of newer requests between page fetches.
//
// Encoding: base64url (no padding) of "v1.<microseconds>.<id>". It is
// opaque to clients; it is not secret (it names a request of the same
// owner, and listing is always filtered by owner).
type cursor struct {
	createdAt int64 // microseconds since the Unix epoch
	id        string
}

const (
	cursorPrefix = "v1."
	// maxCursorLen bounds the encoded cursor read from a client.
	maxCursorLen = 4 * (len(cursorPrefix) + 21 + 1 + MaxIDLen) / 3
)

func (c cursor) encode() string {
	raw := cursorPrefix + strconv.FormatInt(c.createdAt, 10) + "." + c.id
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// decodeCursor parses a cursor produced by encode. Anything else is
// ErrInvalid. It never panics and reads at most maxCursorLen bytes.
func decodeCursor(s string) (cursor, error) {
	bad := func(why string) (cursor, error) {
		return cursor{}, fmt.Errorf("%w: bad page cursor: %s", ErrInvalid, why)
	}
	if len(s) > maxCursorLen {
		return bad("too long")
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return bad("not base64url")
	}
	rest, ok := strings.CutPrefix(string(raw), cursorPrefix)
	if !ok {
		return bad("unknown version")
	}
	ts, id, ok := strings.Cut(rest, ".")
	if !ok {
		return bad("missing id")
	}
	us, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || ts != strconv.FormatInt(us, 10) {
		return bad("bad time")
	}
	if id == "" || len(id) > MaxIDLen {
		return bad("bad id")
	}
	return cursor{createdAt: us, id: id}, nil
}
