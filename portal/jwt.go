package portal

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
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

// ClientAssertionType is the client_assertion_type of a private_key_jwt
// client authentication (RFC 7523 §2.2).
const ClientAssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// AssertionLifetime is how long a client assertion the connector signs
// is valid (its exp is its iat plus AssertionLifetime).
const AssertionLifetime = 5 * time.Minute

// AssertionAlgorithm returns the JWS algorithm of the private_key_jwt
// client assertions the connector signs with a key whose public half is
// pub: "ES256" for ECDSA P-256, "ES384" for P-384, "RS384" for RSA of at
// least 2048 bits. Other keys are refused.
func AssertionAlgorithm(pub crypto.PublicKey) (string, error) {
	alg, err := jwtAlg(pub)
	return string(alg), err
}

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
		Expiry: jwt.NewNumericDate(now.Add(AssertionLifetime)), IssuedAt: jwt.NewNumericDate(now),
		ID: base64.RawURLEncoding.EncodeToString(jti),
	}).Serialize()
	if err != nil {
		return "", fmt.Errorf("portal: client assertion: %w", err)
	}
	return tok, nil
}
