package demoportal

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"errors"
	"fmt"
	"time"

	"github.com/acds-project/acds/portal"
	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// errAssertion is the class of refused client assertions.
var errAssertion = errors.New("invalid client assertion")

// assertionAlg is the one JOSE algorithm the demo accepts for a client
// key: ES256 for P-256, ES384 for P-384, RS384 for RSA of at least 2048
// bits (what the connector signs with).
func assertionAlg(pub crypto.PublicKey) (jose.SignatureAlgorithm, error) {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return jose.ES256, nil
		case elliptic.P384():
			return jose.ES384, nil
		}
	case *rsa.PublicKey:
		if k.N.BitLen() >= 2048 {
			return jose.RS384, nil
		}
	}
	return "", fmt.Errorf("demoportal: client key must be ECDSA P-256/P-384 or RSA ≥ 2048 bits, not %T", pub)
}

// verifyAssertion checks a private_key_jwt client assertion: its
// signature under pub (in assertionAlg's algorithm only), its issuer and
// subject (clientID), audience (the token endpoint) and expiry (present,
// and at most portal.AssertionLifetime ahead, with 30 seconds for clock
// skew), and returns its jti. It does not remember jti values: replay
// protection is the caller's.
func verifyAssertion(token string, pub crypto.PublicKey, clientID, audience string, now time.Time) (string, error) {
	if len(token) > 8<<10 {
		return "", fmt.Errorf("%w: too long", errAssertion)
	}
	alg, err := assertionAlg(pub)
	if err != nil {
		return "", err
	}
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{alg})
	if err != nil {
		return "", fmt.Errorf("%w: %w", errAssertion, err)
	}
	var c jwt.Claims
	if err := tok.Claims(pub, &c); err != nil {
		return "", fmt.Errorf("%w: %w", errAssertion, err)
	}
	if err := c.ValidateWithLeeway(jwt.Expected{Issuer: clientID, Subject: clientID, AnyAudience: jwt.Audience{audience}, Time: now}, 0); err != nil {
		return "", fmt.Errorf("%w: %w", errAssertion, err)
	}
	switch {
	case c.Expiry == nil || c.Expiry.Time().After(now.Add(portal.AssertionLifetime+30*time.Second)):
		return "", fmt.Errorf("%w: no expiry, or valid for too long", errAssertion)
	case c.ID == "":
		return "", fmt.Errorf("%w: no jti", errAssertion)
	}
	return c.ID, nil
}
