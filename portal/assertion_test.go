package portal

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// TestClientAssertionClaims checks what the connector signs for
// private_key_jwt: the algorithm of the key, kid and typ, and the claims
// RFC 7523 asks for. The demo portal's side (verification) has its own
// tests; TestPrivateKeyJWTClients runs both against each other.
func TestClientAssertionClaims(t *testing.T) {
	now := time.Unix(1.8e9, 0)
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	const aud = "https://portal.example/auth/token"
	for k, alg := range map[crypto.Signer]jose.SignatureAlgorithm{p256: jose.ES256, p384: jose.ES384, rsaKey: jose.RS384} {
		a, err := clientAssertion(k, "k1", "client-1", aud, now, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := jwt.ParseSigned(a, []jose.SignatureAlgorithm{alg})
		if err != nil {
			t.Fatalf("%s: %v", alg, err)
		}
		if h := tok.Headers[0]; h.KeyID != "k1" || h.ExtraHeaders["typ"] != "JWT" {
			t.Errorf("%s: header %+v", alg, h)
		}
		var c jwt.Claims
		if err := tok.Claims(k.Public(), &c); err != nil {
			t.Fatalf("%s: %v", alg, err)
		}
		if c.Issuer != "client-1" || c.Subject != "client-1" || len(c.Audience) != 1 || c.Audience[0] != aud || c.ID == "" ||
			!c.IssuedAt.Time().Equal(now) || !c.Expiry.Time().Equal(now.Add(AssertionLifetime)) {
			t.Errorf("%s: claims %+v", alg, c)
		}
	}
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	if _, err := clientAssertion(small, "", "c", aud, now, rand.Reader); err == nil {
		t.Error("a 1024-bit RSA key was accepted")
	}
}
