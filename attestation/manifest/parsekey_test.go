package manifest_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"strings"
	"testing"

	"github.com/acds-project/acds/attestation/manifest"
)

// TestParsePublicKeyForms: a description's notaryKeys take the key as
// acds notary prints it (PEM), its PEM body (base64 PKIX), or the 32 raw
// bytes in hex or base64; other keys and junk are refused with ErrInvalid.
func TestParsePublicKeyForms(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := string(manifest.MarshalPublicKey(pub))
	for name, s := range map[string]string{
		"PEM":                pemKey,
		"PEM, spaces around": "\n  " + pemKey + "  \n",
		"PKIX base64":        base64.StdEncoding.EncodeToString(der),
		"hex":                hex.EncodeToString(pub),
		"base64":             base64.StdEncoding.EncodeToString(pub),
		"raw URL base64":     base64.RawURLEncoding.EncodeToString(pub),
	} {
		got, err := manifest.ParsePublicKey(s)
		if err != nil || !got.Equal(pub) {
			t.Errorf("%s: %x %v", name, got, err)
		}
	}
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecDER, _ := x509.MarshalPKIXPublicKey(&ec.PublicKey)
	for name, s := range map[string]string{
		"ECDSA PEM":       string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: ecDER})),
		"ECDSA base64":    base64.StdEncoding.EncodeToString(ecDER),
		"private key PEM": strings.Replace(pemKey, "PUBLIC", "PRIVATE", 2),
		"broken PEM":      "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n",
		"short hex":       hex.EncodeToString(pub[:31]),
		"junk":            "not a key",
	} {
		if got, err := manifest.ParsePublicKey(s); !errors.Is(err, manifest.ErrInvalid) {
			t.Errorf("%s: %x %v, want ErrInvalid", name, got, err)
		}
	}
}

// TestParsePublicKeyQuotesNothing: a key file holding a private key in
// hex (a mistake) is refused without the key in the message.
func TestParsePublicKeyQuotesNothing(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	secret := hex.EncodeToString(priv)
	_, err := manifest.ParsePublicKey(secret)
	if !errors.Is(err, manifest.ErrInvalid) || strings.Contains(err.Error(), secret[:16]) {
		t.Fatalf("%v", err)
	}
}
