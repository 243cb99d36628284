package store

import (
	"fmt"
	"strings"
	"time"
)

// The rules every backend applies to its arguments, exported so that a test
// double of Store (server/servertest) applies exactly the same ones instead
// of a copy that can drift. Each returns an error matching ErrInvalid.

// CheckName checks an id, owner, pseudonym or worker name: non-empty and at
// most 200 bytes. what names the argument in the error.
func CheckName(what, v string) error { return checkName(what, v) }

// CheckTokenHash checks that h is a SHA-256 (32 bytes).
func CheckTokenHash(h []byte) error { return checkTokenHash(h) }

// CheckSession checks a session before CreateSession stores it.
func CheckSession(s Session) error { return checkSession(s) }

// CheckNewRequest checks a request before CreateRequest stores it.
func CheckNewRequest(r Request) error { return checkNewRequest(r) }

// NormalizeClaim checks o and fills in its documented defaults (a zero Now
// is the current time), with Now at the stores' precision.
func NormalizeClaim(o ClaimOptions) (ClaimOptions, error) { return claimSettings(o) }

// ClampLimit clamps a page size to 1..100.
func ClampLimit(n int) int { return clampLimit(n) }

// StoredTime is t as the stores keep it: UTC, microsecond precision.
func StoredTime(t time.Time) time.Time { return dbTime(t) }

// EncodeCursor is the page cursor naming the request created at createdAt
// with id, as ListRequests returns it.
func EncodeCursor(createdAt time.Time, id string) string {
	return cursor{createdAt: createdAt.UnixMicro(), id: id}.encode()
}

// DecodeCursor parses a cursor made by EncodeCursor; anything else is
// ErrInvalid.
func DecodeCursor(s string) (createdAt time.Time, id string, err error) {
	c, err := decodeCursor(s)
	if err != nil {
		return time.Time{}, "", err
	}
	return time.UnixMicro(c.createdAt).UTC(), c.id, nil
}

// SessionOwner returns the pseudonym of a session key (Session.Pseudonym):
// the key up to its first ".", or the whole key when it has none.
func SessionOwner(key string) string {
	p, _, _ := strings.Cut(key, ".")
	return p
}

// SessionKeyRange returns the half-open range [lo, hi) of the session keys
// of pseudonym other than the bare pseudonym — every key that starts with
// pseudonym + "." ("/" is the byte after ".") — for backends that select
// the sessions DeleteSessionsOf removes by key order.
func SessionKeyRange(pseudonym string) (lo, hi string) {
	return pseudonym + ".", pseudonym + "/"
}

// CheckTrustAnchor checks an anchor before PutTrustAnchor stores it.
func CheckTrustAnchor(a TrustAnchor) error {
	if err := checkName("replica", a.Replica); err != nil {
		return err
	}
	if len(a.Anchor) == 0 || len(a.Anchor) > MaxAnchorLen {
		return fmt.Errorf("%w: trust anchor must be 1..%d bytes, not %d", ErrInvalid, MaxAnchorLen, len(a.Anchor))
	}
	return nil
}
