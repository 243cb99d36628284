package demoportal

import (
	"crypto"
	"errors"
	"fmt"
	"time"

	"github.com/acds-project/acds/portal"
	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// errAssertion is the class of refused client assertions.
var errAssertion = errors.New("invalid client assertion")

// verifyAssertion checks a private_key_jwt client assertion: its
// signature under pub (in the one algorithm portal.AssertionAlgorithm
// names for it, the connector's), its issuer and subject (clientID),
// audience (the token endpoint) and expiry (present, and at most
// portal.AssertionLifetime ahead, with 30 seconds for clock skew), and
// returns its jti. It does not remember jti values: replay
// protection is the caller's.
func verifyAssertion(token string, pub crypto.PublicKey, clientID, audience string, now time.Time) (string, error) {
	if len(token) > 8<<10 {
		return "", fmt.Errorf("%w: too long", errAssertion)
	}
	alg, err := portal.AssertionAlgorithm(pub)
	if err != nil {
		return "", err
	}
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.SignatureAlgorithm(alg)})
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
