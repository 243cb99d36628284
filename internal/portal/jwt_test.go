package portal

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestPrivateKeyJWTClients(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p := startDemo(t, Options{Patients: 2, ClientKey: &key.PublicKey})
	origin := strings.TrimSuffix(p.Base, "/fhir")
	for _, tc := range []struct {
		name string
		key  crypto.Signer
		ok   bool
	}{{"registered key", key, true}, {"other key", other, false}, {"no key", nil, false}} {
		for _, st := range []string{SystemSMARTPassword, SystemSMARTForm} {
			c := testConnector()
			c.Registrations = map[string]Registration{origin: {ClientID: DemoClientID, RedirectURI: DemoRedirectURI, Key: tc.key, KeyID: "k1"}}
			_, err := c.Fetch(context.Background(), p.client, Request{SystemType: st, PortalURL: p.Base, RecordID: PatientID(1), Credentials: demoCreds})
			if tc.ok && err != nil {
				t.Errorf("%s, %s: %v", tc.name, st, err)
			}
			if !tc.ok && !errors.Is(err, ErrAuthFailed) {
				t.Errorf("%s, %s: %v, want auth failed", tc.name, st, err)
			}
		}
	}
}

func TestClientAssertions(t *testing.T) {
	now := time.Unix(1.8e9, 0)
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	const aud = "https://portal.example/auth/token"
	for _, k := range []crypto.Signer{p256, p384, rsaKey} {
		a, err := clientAssertion(k, "", "client-1", aud, now, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if jti, err := verifyAssertion(a, k.Public(), "client-1", aud, now); err != nil || jti == "" {
			t.Errorf("%T: %v", k, err)
		}
		for name, check := range map[string]func() error{
			"other client":   func() error { _, err := verifyAssertion(a, k.Public(), "client-2", aud, now); return err },
			"other audience": func() error { _, err := verifyAssertion(a, k.Public(), "client-1", aud+"x", now); return err },
			"expired": func() error {
				_, err := verifyAssertion(a, k.Public(), "client-1", aud, now.Add(time.Hour))
				return err
			},
			"other key": func() error { _, err := verifyAssertion(a, p384.Public(), "client-1", aud, now); return err },
			"tampered": func() error {
				parts := strings.Split(a, ".")
				_, err := verifyAssertion(parts[0]+"."+parts[1]+"x."+parts[2], k.Public(), "client-1", aud, now)
				return err
			},
		} {
			if k == crypto.Signer(p384) && name == "other key" {
				continue
			}
			if err := check(); err == nil {
				t.Errorf("%T %s: accepted", k, name)
			}
		}
	}
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	if _, err := clientAssertion(small, "", "c", aud, now, rand.Reader); err == nil {
		t.Error("a 1024-bit RSA key was accepted")
	}
	if _, err := verifyAssertion("a.b", p256.Public(), "c", aud, now); !errors.Is(err, errAssertion) {
		t.Errorf("malformed: %v", err)
	}
}
