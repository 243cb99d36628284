package portal

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/cryptosigner"
	"github.com/go-jose/go-jose/v4/jwt"
)

// SMART client authentication with private_key_jwt (RFC 7523, SMART App
// Launch "asymmetric" client authentication): the client signs a short
// JWT naming itself and the token endpoint. go-jose does the JOSE work.

const clientAssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// errAssertion is the class of client-assertion failures in the demo.
var errAssertion = errors.New("invalid client assertion")

// assertionLifetime is how long a client assertion is valid.
const assertionLifetime = 5 * time.Minute

// jwtAlg returns the JOSE algorithm for a key: ES256 for P-256, ES384
// for P-384, RS384 for RSA of at least 2048 bits.
func jwtAlg(pub crypto.PublicKey) (jose.SignatureAlgorithm, error) {
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
	return "", fmt.Errorf("portal: client key must be ECDSA P-256/P-384 or RSA ≥ 2048 bits, not %T", pub)
}

// clientAssertion signs the private_key_jwt assertion for clientID at
// audience (the token endpoint URL). random supplies its jti.
func clientAssertion(key crypto.Signer, keyID, clientID, audience string, now time.Time, random io.Reader) (string, error) {
	alg, err := jwtAlg(key.Public())
	if err != nil {
		return "", err
	}
	jti := make([]byte, 16)
	if _, err := io.ReadFull(random, jti); err != nil {
		return "", fmt.Errorf("portal: client assertion: %w", err)
	}
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if keyID != "" {
		opts = opts.WithHeader("kid", keyID)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: cryptosigner.Opaque(key)}, opts)
	if err != nil {
		return "", fmt.Errorf("portal: client assertion: %w", err)
	}
	tok, err := jwt.Signed(signer).Claims(jwt.Claims{
		Issuer: clientID, Subject: clientID, Audience: jwt.Audience{audience},
		Expiry: jwt.NewNumericDate(now.Add(assertionLifetime)), IssuedAt: jwt.NewNumericDate(now),
		ID: base64.RawURLEncoding.EncodeToString(jti),
	}).Serialize()
	if err != nil {
		return "", fmt.Errorf("portal: client assertion: %w", err)
	}
	return tok, nil
}

// verifyAssertion checks a client assertion's signature under pub (in
// the one algorithm jwtAlg names for it), its issuer and subject
// (clientID), audience and expiry (present, and at most 5 minutes ahead,
// with 30 seconds for clock skew), and returns its jti. It does not
// remember jti values: replay protection is the caller's.
func verifyAssertion(token string, pub crypto.PublicKey, clientID, audience string, now time.Time) (string, error) {
	if len(token) > 8<<10 {
		return "", fmt.Errorf("%w: too long", errAssertion)
	}
	alg, err := jwtAlg(pub)
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
	case c.Expiry == nil || c.Expiry.Time().After(now.Add(assertionLifetime+30*time.Second)):
		return "", fmt.Errorf("%w: no expiry, or valid for too long", errAssertion)
	case c.ID == "":
		return "", fmt.Errorf("%w: no jti", errAssertion)
	}
	return c.ID, nil
}
