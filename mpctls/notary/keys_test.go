package notary_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"strings"
	"testing"

	"github.com/acds-project/acds/mpctls/notary"
)

func TestKeyEncodings(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	pemPub, err := notary.MarshalPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	for name, in := range map[string][]byte{
		"pem":       pemPub,
		"base64":    []byte(base64.StdEncoding.EncodeToString(pub) + "\n"),
		"base64url": []byte(base64.RawURLEncoding.EncodeToString(pub)),
	} {
		got, err := notary.ParsePublicKey(in)
		if err != nil || !got.Equal(pub) {
			t.Errorf("%s: %v", name, err)
		}
	}
	pemPriv, err := notary.MarshalPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	got, err := notary.ParsePrivateKey(pemPriv)
	if err != nil || !got.Equal(priv) {
		t.Fatalf("private key round trip: %v", err)
	}
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecDER, _ := x509.MarshalPKIXPublicKey(ec.Public())
	ecPrivDER, _ := x509.MarshalPKCS8PrivateKey(ec)
	for name, in := range map[string][]byte{
		"ecdsa public": pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: ecDER}),
		"wrong block":  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ecDER}),
		"short base64": []byte(base64.StdEncoding.EncodeToString(pub[:31])),
		"garbage":      []byte("not a key"),
	} {
		if _, err := notary.ParsePublicKey(in); !errors.Is(err, notary.ErrKey) {
			t.Errorf("%s: %v, want ErrKey", name, err)
		}
	}
	_, err = notary.ParsePrivateKey(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecPrivDER}))
	if !errors.Is(err, notary.ErrKey) {
		t.Errorf("ecdsa private key: %v, want ErrKey", err)
	}
	_, err = notary.ParsePrivateKey([]byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"))
	if !errors.Is(err, notary.ErrKey) || strings.Contains(err.Error(), "AAAA") {
		t.Errorf("garbage private key: %v", err)
	}
}
