package demoportal

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// sign makes a client assertion the way a client would.
func sign(t *testing.T, key crypto.Signer, alg jose.SignatureAlgorithm, c jwt.Claims) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(c).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestVerifyAssertion(t *testing.T) {
	now := time.Unix(1.8e9, 0)
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	const aud = "https://portal.example/auth/token"
	good := jwt.Claims{Issuer: "client-1", Subject: "client-1", Audience: jwt.Audience{aud}, ID: "j1",
		IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(5 * time.Minute))}
	for k, alg := range map[crypto.Signer]jose.SignatureAlgorithm{p256: jose.ES256, p384: jose.ES384, rsaKey: jose.RS384} {
		a := sign(t, k, alg, good)
		if jti, err := verifyAssertion(a, k.Public(), "client-1", aud, now); err != nil || jti != "j1" {
			t.Errorf("%s: %q, %v", alg, jti, err)
		}
		with := func(f func(*jwt.Claims)) string {
			c := good
			f(&c)
			return sign(t, k, alg, c)
		}
		other := crypto.PublicKey(p384.Public())
		if k == crypto.Signer(p384) {
			other = p256.Public()
		}
		for name, check := range map[string]func() error{
			"other client":   func() error { _, err := verifyAssertion(a, k.Public(), "client-2", aud, now); return err },
			"other audience": func() error { _, err := verifyAssertion(a, k.Public(), "client-1", aud+"x", now); return err },
			"expired": func() error {
				_, err := verifyAssertion(a, k.Public(), "client-1", aud, now.Add(time.Hour))
				return err
			},
			"other key": func() error { _, err := verifyAssertion(a, other, "client-1", aud, now); return err },
			"tampered": func() error {
				parts := strings.Split(a, ".")
				_, err := verifyAssertion(parts[0]+"."+parts[1]+"x."+parts[2], k.Public(), "client-1", aud, now)
				return err
			},
			"no expiry": func() error {
				_, err := verifyAssertion(with(func(c *jwt.Claims) { c.Expiry = nil }), k.Public(), "client-1", aud, now)
				return err
			},
			"valid for an hour": func() error {
				_, err := verifyAssertion(with(func(c *jwt.Claims) { c.Expiry = jwt.NewNumericDate(now.Add(time.Hour)) }), k.Public(), "client-1", aud, now)
				return err
			},
			"no jti": func() error {
				_, err := verifyAssertion(with(func(c *jwt.Claims) { c.ID = "" }), k.Public(), "client-1", aud, now)
				return err
			},
		} {
			if err := check(); !errors.Is(err, errAssertion) {
				t.Errorf("%s %s: %v, want a refused assertion", alg, name, err)
			}
		}
	}
	// RS256 is not the algorithm the demo expects of an RSA key.
	if _, err := verifyAssertion(sign(t, rsaKey, jose.RS256, good), rsaKey.Public(), "client-1", aud, now); !errors.Is(err, errAssertion) {
		t.Errorf("RS256: %v", err)
	}
	if _, err := verifyAssertion("a.b", p256.Public(), "c", aud, now); !errors.Is(err, errAssertion) {
		t.Errorf("malformed: %v", err)
	}
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	if _, err := New(Options{Patients: 1, ClientKey: &small.PublicKey}); err == nil {
		t.Error("a 1024-bit RSA client key was accepted")
	}
}
