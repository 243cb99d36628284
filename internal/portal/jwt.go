package portal

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strings"
	"time"
)

// SMART client authentication with private_key_jwt (RFC 7523, SMART App
// Launch "asymmetric" client authentication): the client signs a short
// JWT naming itself and the token endpoint.

const clientAssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// errAssertion is the class of client-assertion failures in the demo.
var errAssertion = errors.New("invalid client assertion")

// jwtAlg returns the JOSE algorithm for a key: ES256 for P-256, ES384
// for P-384, RS384 for RSA.
func jwtAlg(pub crypto.PublicKey) (alg string, h crypto.Hash, size int, err error) {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return "ES256", crypto.SHA256, 32, nil
		case elliptic.P384():
			return "ES384", crypto.SHA384, 48, nil
		}
	case *rsa.PublicKey:
		if k.N.BitLen() >= 2048 {
			return "RS384", crypto.SHA384, 0, nil
		}
	}
	return "", 0, 0, fmt.Errorf("portal: client key must be ECDSA P-256/P-384 or RSA ≥ 2048 bits, not %T", pub)
}

func digest(h crypto.Hash, data []byte) []byte {
	if h == crypto.SHA256 {
		s := sha256.Sum256(data)
		return s[:]
	}
	s := sha512.Sum384(data)
	return s[:]
}

// clientAssertion signs the private_key_jwt assertion for clientID at
// audience (the token endpoint URL).
func clientAssertion(key crypto.Signer, keyID, clientID, audience string, now time.Time, random io.Reader) (string, error) {
	alg, h, size, err := jwtAlg(key.Public())
	if err != nil {
		return "", err
	}
	jti := make([]byte, 16)
	if _, err := io.ReadFull(random, jti); err != nil {
		return "", fmt.Errorf("portal: client assertion: %w", err)
	}
	hdr := map[string]string{"alg": alg, "typ": "JWT"}
	if keyID != "" {
		hdr["kid"] = keyID
	}
	hb, _ := json.Marshal(hdr)
	cb, _ := json.Marshal(map[string]any{
		"iss": clientID, "sub": clientID, "aud": audience,
		"exp": now.Add(5 * time.Minute).Unix(), "iat": now.Unix(), "jti": base64.RawURLEncoding.EncodeToString(jti),
	})
	signing := base64.RawURLEncoding.EncodeToString(hb) + "." + base64.RawURLEncoding.EncodeToString(cb)
	sig, err := key.Sign(random, digest(h, []byte(signing)), h)
	if err != nil {
		return "", fmt.Errorf("portal: client assertion: %w", err)
	}
	if size > 0 { // ECDSA: ASN.1 to the fixed-size r‖s of JWS
		var rs struct{ R, S *big.Int }
		if _, err := asn1.Unmarshal(sig, &rs); err != nil {
			return "", fmt.Errorf("portal: client assertion: %w", err)
		}
		raw := make([]byte, 2*size)
		rs.R.FillBytes(raw[:size])
		rs.S.FillBytes(raw[size:])
		sig = raw
	}
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// assertionClaims are the checked claims of a client assertion.
type assertionClaims struct {
	Iss string `json:"iss"`
	Sub string `json:"sub"`
	Aud any    `json:"aud"` // a string or an array of strings
	Exp int64  `json:"exp"`
	JTI string `json:"jti"`
}

// verifyAssertion checks a client assertion's signature under pub, its
// issuer and subject (clientID), audience and expiry (at most 5 minutes
// ahead), and returns its jti.
func verifyAssertion(token string, pub crypto.PublicKey, clientID, audience string, now time.Time) (string, error) {
	if len(token) > 8<<10 {
		return "", fmt.Errorf("%w: too long", errAssertion)
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", fmt.Errorf("%w: not a JWS compact serialization", errAssertion)
	}
	alg, h, size, err := jwtAlg(pub)
	if err != nil {
		return "", err
	}
	var hdr struct {
		Alg string `json:"alg"`
	}
	hb, err1 := base64.RawURLEncoding.DecodeString(parts[0])
	cb, err2 := base64.RawURLEncoding.DecodeString(parts[1])
	sig, err3 := base64.RawURLEncoding.DecodeString(parts[2])
	if err := errors.Join(err1, err2, err3); err != nil {
		return "", fmt.Errorf("%w: %w", errAssertion, err)
	}
	if json.Unmarshal(hb, &hdr) != nil || hdr.Alg != alg {
		return "", fmt.Errorf("%w: algorithm must be %s", errAssertion, alg)
	}
	d := digest(h, []byte(parts[0]+"."+parts[1]))
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if len(sig) != 2*size || !ecdsa.Verify(k, d, new(big.Int).SetBytes(sig[:size]), new(big.Int).SetBytes(sig[size:])) {
			return "", fmt.Errorf("%w: bad signature", errAssertion)
		}
	case *rsa.PublicKey:
		if rsa.VerifyPKCS1v15(k, h, d, sig) != nil {
			return "", fmt.Errorf("%w: bad signature", errAssertion)
		}
	}
	var c assertionClaims
	if err := json.Unmarshal(cb, &c); err != nil {
		return "", fmt.Errorf("%w: claims: %w", errAssertion, err)
	}
	audOK := c.Aud == audience
	if list, ok := c.Aud.([]any); ok {
		for _, a := range list {
			audOK = audOK || a == audience
		}
	}
	switch {
	case c.Iss != clientID || c.Sub != clientID:
		return "", fmt.Errorf("%w: iss and sub must be the client id", errAssertion)
	case !audOK:
		return "", fmt.Errorf("%w: audience is not this token endpoint", errAssertion)
	case c.Exp < now.Unix() || c.Exp > now.Add(5*time.Minute+30*time.Second).Unix():
		return "", fmt.Errorf("%w: expired or valid for too long", errAssertion)
	case c.JTI == "":
		return "", fmt.Errorf("%w: no jti", errAssertion)
	}
	return c.JTI, nil
}
