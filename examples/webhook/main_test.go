package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/sim"
	"github.com/acds-project/acds/verify"
	"github.com/acds-project/acds/webhook"
)

// TestReceiver: a delivery signed by the trusted enclave is printed once
// however often it comes; a tampered one, or one of an enclave the
// policy does not trust, is 401.
func TestReceiver(t *testing.T) {
	mk := func() *attestation.Enclave {
		b, err := sim.NewBackend(filepath.Join(t.TempDir(), "e"), sim.Options{RSABits: 2048})
		if err != nil {
			t.Fatal(err)
		}
		e, err := attestation.New(context.Background(), b, attestation.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e, other := mk(), mk()
	p, err := verify.TrustEnclave(verify.Policy{}, e.BootEvidence(), e.Measurement())
	if err != nil {
		t.Fatal(err)
	}
	v, err := verify.New(p)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rc := NewReceiver(v, func(context.Context) ([]byte, error) { return e.MarshalBootEvidence(), nil }, &out)

	post := func(signer *attestation.Enclave, body []byte) int {
		sig, err := webhook.Sign(signer.SignJWS, signer.BootEvidence().SigningKey, body)
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest("POST", "/", bytes.NewReader(body))
		req.Header.Set(webhook.SignatureHeader, sig)
		req.Header.Set(webhook.IdempotencyHeader, "acds-webhook-1")
		w := httptest.NewRecorder()
		rc.ServeHTTP(w, req)
		return w.Code
	}
	body, _ := json.Marshal(webhook.Payload{RequestID: "r-1", Status: acds.StatusCompleted, OutputDigest: "sha256:ab"})
	for range 2 {
		if code := post(e, body); code != http.StatusNoContent {
			t.Fatalf("genuine delivery: %d", code)
		}
	}
	if n := strings.Count(out.String(), "request r-1 completed: output sha256:ab"); n != 1 {
		t.Fatalf("printed %d times:\n%s", n, out.String())
	}
	if code := post(other, body); code != http.StatusUnauthorized {
		t.Errorf("another enclave: %d", code)
	}
	sig, _ := webhook.Sign(e.SignJWS, e.BootEvidence().SigningKey, body)
	req := httptest.NewRequest("POST", "/", strings.NewReader(strings.Replace(string(body), "ab", "cd", 1)))
	req.Header.Set(webhook.SignatureHeader, sig)
	w := httptest.NewRecorder()
	rc.ServeHTTP(w, req)
	if w.Code != http.StatusUnauthorized {
		t.Errorf("tampered body: %d", w.Code)
	}
}
